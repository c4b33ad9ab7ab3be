// Entry point of the test page (bundled by build.mjs with esbuild): <App/>, or with
// ?chat=<id> the page on the server's thread of that chat id (<ThreadApp/>).
import { createRoot } from "react-dom/client";
import { App } from "./App.jsx";
import { ThreadApp } from "./ThreadApp.jsx";

const chatId = new URLSearchParams(window.location.search).get("chat");
createRoot(document.getElementById("root")).render(
  chatId ? <ThreadApp chatId={chatId} /> : <App />,
);
