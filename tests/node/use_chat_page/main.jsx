// Entry point of the test page: mounts <App/> (bundled by build.mjs with esbuild).
import { createRoot } from "react-dom/client";
import { App } from "./App.jsx";

createRoot(document.getElementById("root")).render(<App />);
