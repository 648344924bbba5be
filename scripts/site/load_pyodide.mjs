// The kernel's Pyodide as this site ships it: the site's jupyter-lite.json names this
// module as the kernel's pyodideUrl, and the kernel's worker calls its loadPyodide.
//
// - Pyodide's JavaScript, the standard library and every wheel are stored gzipped
//   (NAME.gz, scripts/site/build.py), because `python -m http.server` and many static
//   hosts send files as they are. Here each is fetched as NAME.gz and inflated by the
//   browser's DecompressionStream; where Pyodide asks for a file's sha256 (the wheels,
//   from pyodide-lock.json), the inflated bytes are checked against it.
// - Once Python runs, its import path looks in the current folder last, not first: the
//   kernel then changes into the notebook's folder on the JupyterLite drive, where each
//   look is a synchronous request answered by the page, and every import of the
//   kernel's start (about 90 of them) would ask there first for a module that is not
//   there. A module beside the notebook still imports, unless an installed one has its name.
import { loadPyodide as loadStock } from "./pyodide.mjs";

// The suffixes build.py stores gzipped (GZIPPED there): keep the two lists alike.
const GZIPPED = [".asm.mjs", ".zip", ".whl"];
const here = new URL("./", import.meta.url).href;
const stockFetch = globalThis.fetch.bind(globalThis);

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

export async function loadPyodide(options) {
  // options.packages, the kernel's own, only tell the kernel not to install them: they
  // are in the standard library's zip (build.py), or left out (jedi).
  const createPyodideModule = await pyodideModule();
  const pyodide = await loadStock({ ...options, packages: [], createPyodideModule });
  pyodide.runPython(
    "import sys\nif '' in sys.path:\n    sys.path.remove('')\n    sys.path.append('')\n",
  );
  return pyodide;
}
