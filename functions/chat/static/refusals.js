// A message sent on a thread that the server refused for the thread's sake, said in words:
// another run holds the thread (409), the thread is gone (404), or the server cannot keep
// threads now (503: the conversation goes on in the page, sent whole).

import { describeFailure } from "./errors.js";

// A send on a thread the server refused for the thread's sake: said, and true; else false.
// 409: another run holds the thread; 404: the thread is gone; 503: the server cannot keep
// threads now (the next send goes without one).
export function threadRefusal(chat, request, failure, { reply, userArticle, text }) {
  if (!request.body.thread_id) return false;
  if (failure.status === 409) {
    const banner =
      "This conversation has a run going on already (in another tab?). Wait for it to " +
      "end, then send again.";
    chat.notSent(reply, userArticle, text, failure, request.url, banner);
    return true;
  }
  if (failure.status === 404 && chat.thread) {
    chat.threadGone(text);
    return true;
  }
  if (failure.status === 503) {
    chat.local = true;
    chat.threadsAvailable = false;
    const banner = [
      ...[].concat(describeFailure(failure, request.url, chat.canSignIn)),
      " (Saved conversations are unavailable: send again to go on in this page only.)",
    ];
    chat.notSent(reply, userArticle, text, failure, request.url, banner);
    return true;
  }
  return false;
}
