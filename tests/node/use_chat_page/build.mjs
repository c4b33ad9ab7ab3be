// Bundles the useChat test page with esbuild's JS API into input.outdir (a temporary
// directory of the test session): app.js (React, @ai-sdk/react and ai, minified) next to
// index.html and style.css. Prints {files, ms} as its last line, like every client script.
import { build } from "esbuild";
import { copyFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { outdir } = JSON.parse(process.env.AGENTLOOP_TEST_INPUT ?? "{}");
if (!outdir) throw new Error("AGENTLOOP_TEST_INPUT needs an outdir");

const started = performance.now();
const result = await build({
  entryPoints: [join(here, "main.jsx")],
  outfile: join(outdir, "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome120",
  jsx: "automatic",
  minify: true,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "silent",
  metafile: true,
});
await copyFile(join(here, "index.html"), join(outdir, "index.html"));
await copyFile(join(here, "style.css"), join(outdir, "style.css"));
const files = Object.fromEntries(
  Object.entries(result.metafile.outputs).map(([path, { bytes }]) => [basename(path), bytes]),
);
const ms = Math.round(performance.now() - started);
console.log(JSON.stringify({ files, warnings: result.warnings.length, ms }));
