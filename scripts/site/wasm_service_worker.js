// Put before JupyterLite's service-worker.js by scripts/site/build.py: the site stores
// Pyodide's WebAssembly module gzipped only (pyodide.asm.wasm.gz). Asked for the module
// by its own URL, this worker answers with it inflated, kept in Cache Storage under that
// URL after the first time. Chromium keeps a module's compiled code only beside a
// response from the HTTP cache or from Cache Storage, so a later kernel does not compile
// it again. A kernel this worker does not control gets a 404 for that URL and inflates
// the .gz itself (load_pyodide.mjs).
const WASM_PATH = "/static/pyodide/pyodide.asm.wasm";
// One cache per module: the build names it after the .gz's sha256.
const WASM_CACHE_PREFIX = "agent17-pyodide-wasm-";
const WASM_CACHE = `${WASM_CACHE_PREFIX}WASM_DIGEST`;

async function keptWasm(request) {
  const cache = await caches.open(WASM_CACHE);
  const kept = await cache.match(request);
  if (kept) {
    return kept;
  }
  const packed = await fetch(`${request.url}.gz`);
  if (!packed.ok) {
    return packed;
  }
  // A host that labels .gz files Content-Encoding: gzip has had the browser inflate them.
  const encoding = packed.headers.get("Content-Encoding") || "";
  const body = encoding.includes("gzip")
    ? packed.body
    : packed.body.pipeThrough(new DecompressionStream("gzip"));
  await cache.put(request, new Response(body, { headers: { "Content-Type": "application/wasm" } }));
  for (const name of await caches.keys()) {
    if (name.startsWith(WASM_CACHE_PREFIX) && name !== WASM_CACHE) {
      await caches.delete(name);
    }
  }
  return cache.match(request);
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (url.origin === location.origin && url.pathname.endsWith(WASM_PATH)) {
    // JupyterLite's own listener, after this one, would pass the request on.
    event.stopImmediatePropagation();
    event.respondWith(keptWasm(event.request));
  }
});
