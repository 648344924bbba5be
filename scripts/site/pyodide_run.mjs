// Run a Python script inside Pyodide under Node, with a host folder mounted at /work.
//
//     node pyodide_run.mjs PYODIDE_DIR SCRIPT.py WORK_DIR [ARGUMENT...]
//
// scripts/site/build.py uses it to compile the site's Python with Pyodide's own
// interpreter, so the bytecode matches the browser's exactly. A Python error
// exits 1 with its traceback on stderr.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, script, workDir, ...args] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(join(resolve(pyodideDir), "pyodide.mjs")));
const pyodide = await loadPyodide({ indexURL: resolve(pyodideDir) + "/" });
pyodide.FS.mkdir("/work");
pyodide.mountNodeFS("/work", resolve(workDir));
// A JSON list of strings is a Python list of strings too.
pyodide.runPython(`import sys; sys.argv = ${JSON.stringify([script, ...args])}`);
try {
  await pyodide.runPythonAsync(readFileSync(script, "utf8"), { filename: script });
} catch (error) {
  process.stderr.write(String(error.message ?? error) + "\n");
  process.exit(1);
}
