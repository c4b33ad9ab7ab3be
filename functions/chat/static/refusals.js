// A message sent on a thread that the server refused for the thread's sake: another run
// holds the thread (409), the thread is gone (404), or the server cannot keep threads now.
// Each is refused before anything runs, so nothing is lost by sending again.

// The server cannot keep threads now: its store is down (503), or a thread it was asked to
// make is not there (404 for "new"). The message is sent again without one.
export const threadsUnavailable = (request, failure) =>
  Boolean(request.body.thread_id) &&
  (failure.status === 503 || (failure.status === 404 && request.body.thread_id === "new"));

// A send on a thread refused for the thread's sake: said, and true; else false.
// 409: another run holds the thread; 404: the thread is gone (a new chat).
export function threadRefusal(chat, request, failure, { reply, userArticle, text, files }) {
  if (!request.body.thread_id) return false;
  if (failure.status === 409) {
    const banner =
      "This conversation has a run going on already (a stopped answer still finishing on " +
      "the server, or another tab). Wait for it to end, then send again.";
    chat.notSent(reply, userArticle, { text, files }, failure, request.url, banner);
    return true;
  }
  if (failure.status === 404 && chat.thread) {
    chat.threadGone(text, files);
    return true;
  }
  return false;
}
