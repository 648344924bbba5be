// Put before JupyterLite's service worker (service-worker.js) by scripts/site/build.py.
// The site stores Pyodide's WebAssembly module gzipped only (pyodide.asm.wasm.gz), and
// Graphviz's script (viz-global.js, 1.3 MB, 0.5 MB gzipped) both ways. Asked for either
// by its own URL, this worker answers with the .gz inflated:
// - the module is kept in Cache Storage under its URL after the first time. Chromium
//   keeps a module's compiled code only beside a response that has a URL, from the HTTP
//   cache or Cache Storage, so a later kernel does not compile it again. A kernel this
//   worker does not control gets a 404 for that URL and inflates the .gz itself
//   (load_pyodide.mjs);
// - Graphviz's script is read by agent17 with a synchronous request, which cannot wait
//   for an inflation in the kernel's worker; one this worker does not see gets the
//   plain file.
const INFLATED = {
  "/static/pyodide/pyodide.asm.wasm": "application/wasm",
  "/static/pyodide/viz-global.js": "text/javascript",
};
const KEPT = "/static/pyodide/pyodide.asm.wasm";
// One cache per module: the build names it after the .gz's sha256.
const WASM_CACHE_PREFIX = "agent17-pyodide-wasm-";
const WASM_CACHE = `${WASM_CACHE_PREFIX}WASM_DIGEST`;

async function inflated(request, type) {
  const packed = await fetch(`${request.url}.gz`);
  if (!packed.ok) {
    return packed;
  }
  // A host that labels .gz files Content-Encoding: gzip has had the browser inflate them.
  const encoding = packed.headers.get("Content-Encoding") || "";
  const body = encoding.includes("gzip")
    ? packed.body
    : packed.body.pipeThrough(new DecompressionStream("gzip"));
  return new Response(body, { headers: { "Content-Type": type } });
}

async function kept(request, type) {
  try {
    const cache = await caches.open(WASM_CACHE);
    const found = await cache.match(request);
    if (found) {
      return found;
    }
    const response = await inflated(request, type);
    if (!response.ok) {
      return response;
    }
    await cache.put(request, response);
    for (const name of await caches.keys()) {
      if (name.startsWith(WASM_CACHE_PREFIX) && name !== WASM_CACHE) {
        await caches.delete(name);
      }
    }
    return await cache.match(request);
  } catch {
    // Cache Storage full or unavailable: the module is still served, only not kept (a
    // failed answer here would fail the kernel's fetch, not fall back).
    return inflated(request, type);
  }
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const path = Object.keys(INFLATED).find((each) => url.pathname.endsWith(each));
  if (url.origin === location.origin && path) {
    // JupyterLite's own listener, after this one, would pass the request on.
    event.stopImmediatePropagation();
    const answer = path === KEPT ? kept : inflated;
    event.respondWith(answer(event.request, INFLATED[path]));
  }
});
