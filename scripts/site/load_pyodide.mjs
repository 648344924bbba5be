// The kernel's Pyodide as this site ships it: the site's jupyter-lite.json names this
// module as the kernel's pyodideUrl, and the kernel's worker calls its loadPyodide.
//
// - Pyodide's JavaScript and WebAssembly, the standard library and every wheel are
//   stored gzipped (NAME.gz, scripts/site/build.py), because `python -m http.server`
//   and many static hosts send files as they are. Here each is fetched as NAME.gz and
//   inflated by the browser's DecompressionStream; where Pyodide asks for a file's
//   sha256 (the wheels, from pyodide-lock.json), the inflated bytes are checked against it.
// - The WebAssembly module is asked for by its own URL first: the site's service worker
//   answers with it inflated and kept in Cache Storage (inflating_service_worker.js in
//   scripts/site), where Chromium keeps its compiled code for the next kernel. A kernel
//   that worker does not control (it is not running yet, or there is no Cache Storage:
//   plain http off this machine) gets a 404 and inflates the .gz itself.
// - Once Python runs, its import path looks in the current folder last, not first: the
//   kernel then changes into the notebook's folder on the JupyterLite drive, where each
//   look is a synchronous request answered by the page, and every import of the
//   kernel's start (about 90 of them) would ask there first for a module that is not
//   there. A module beside the notebook still imports, unless an installed one has its name.
import { loadPyodide as loadStock } from "./pyodide.mjs";

// The suffixes build.py stores gzipped (GZIPPED there): keep the two lists alike.
const GZIPPED = [".asm.mjs", ".asm.wasm", ".zip", ".whl"];
const here = new URL("./", import.meta.url).href;
const stockFetch = globalThis.fetch.bind(globalThis);
const WASM = `${here}pyodide.asm.wasm`;

function isGzipped(url) {
  return url.startsWith(here) && GZIPPED.some((suffix) => url.endsWith(suffix));
}

async function inflated(url) {
  const response = await stockFetch(`${url}.gz`);
  if (!response.ok) {
    return response;
  }
  // A host that labels .gz files Content-Encoding: gzip has had the browser inflate them.
  const encoding = response.headers.get("Content-Encoding") || "";
  const body = encoding.includes("gzip")
    ? response.body
    : response.body.pipeThrough(new DecompressionStream("gzip"));
  return new Response(body);
}

async function inflatedWasm() {
  const response = await inflated(WASM);
  // WebAssembly.instantiateStreaming takes a response of this type only.
  const headers = { "Content-Type": "application/wasm" };
  return response.ok ? new Response(response.body, { headers }) : response;
}

async function wasmResponse() {
  // The site's service worker answers for the module's own URL (inflating_service_worker.js);
  // without one that URL is a 404, and a worker that failed is a network error.
  const served = await stockFetch(WASM).catch(() => null);
  return served && served.ok ? served : inflatedWasm();
}

async function checked(response, integrity) {
  const bytes = await response.arrayBuffer();
  const [algorithm, expected] = integrity.split("-", 2);
  const digest = await crypto.subtle.digest(algorithm.replace("sha", "SHA-"), bytes);
  const actual = btoa(String.fromCharCode(...new Uint8Array(digest)));
  if (actual !== expected) {
    throw new TypeError(`integrity check failed: ${integrity} is not ${algorithm}-${actual}`);
  }
  return new Response(bytes, { headers: response.headers });
}

globalThis.fetch = async (resource, init) => {
  const url = new URL(resource instanceof Request ? resource.url : resource, location.href).href;
  if (!isGzipped(url)) {
    return stockFetch(resource, init);
  }
  if (url === WASM) {
    return wasmResponse();
  }
  const response = await inflated(url);
  return init && init.integrity && response.ok ? checked(response, init.integrity) : response;
};

async function pyodideModule() {
  // Pyodide would import pyodide.asm.mjs itself; its gzipped copy is imported as a blob.
  const response = await globalThis.fetch(`${here}pyodide.asm.mjs`);
  const source = URL.createObjectURL(
    new Blob([await response.arrayBuffer()], { type: "text/javascript" }),
  );
  try {
    return (await import(/* webpackIgnore: true */ source)).default;
  } finally {
    URL.revokeObjectURL(source);
  }
}

// Python's importer for the modules no kernel start imports: the build stores them in
// a zip of their own (STDLIB_REST in build.py), listed in the standard library's zip.
// The first import of one fetches that zip (a synchronous request: allowed in the
// kernel's worker, and the import statement waits for nothing else).
const STDLIB_REST = `
import sys, zipimport, zlib
from importlib.machinery import PathFinder

def install(url):
    stdlib = next(entry for entry in sys.path if entry.endswith(".zip"))
    listed = zipimport.zipimporter(stdlib).get_data("python_stdlib_rest.txt")
    names = frozenset(listed.decode().split())
    rest = stdlib.removesuffix(".zip") + "_rest.zip"

    class StdlibRest:
        """Finds the modules of python_stdlib_rest.zip, fetched at its first import."""

        fetched_for = []

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name not in names:
                return None
            if not cls.fetched_for:
                from js import XMLHttpRequest

                request = XMLHttpRequest.new()
                request.open("GET", url, False)
                request.responseType = "arraybuffer"
                request.send(None)
                if request.status != 200:
                    raise ImportError(f"{url} answered {request.status}", name=name)
                data = request.response.to_py().tobytes()
                # A host that labels .gz files Content-Encoding: gzip has had it inflated.
                if data[:2] == b"\\x1f\\x8b":
                    data = zlib.decompress(data, 31)
                with open(rest, "wb") as file:
                    file.write(data)
                cls.fetched_for.append(name)
            package = name.rpartition(".")[0].replace(".", "/")
            return zipimport.zipimporter(f"{rest}/{package}" if package else rest).find_spec(name)

    # Before the path finder, as when these were in the standard library's zip: the
    # notebook's folder (last on the path, on the drive) is not asked for them first.
    sys.meta_path.insert(sys.meta_path.index(PathFinder), StdlibRest)

install
`;

export async function loadPyodide(options) {
  // options.packages, the kernel's own, only tell the kernel not to install them: they
  // are in the standard library's zip (build.py), or left out (jedi).
  const createPyodideModule = await pyodideModule();
  const pyodide = await loadStock({ ...options, packages: [], createPyodideModule });
  pyodide.runPython(
    "import sys\nif '' in sys.path:\n    sys.path.remove('')\n    sys.path.append('')\n",
  );
  const install = pyodide.runPython(STDLIB_REST, { globals: pyodide.toPy({}) });
  install(`${here}python_stdlib_rest.zip.gz`);
  install.destroy();
  return pyodide;
}
