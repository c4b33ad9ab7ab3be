// A body over the server's limit sent with Node's own fetch, which sends all of it before it
// reads the answer: the 413's JSON should reach it, not a reset connection.
//
// Input: {url, token, size}. Output (last line): {status, body} as fetch read them, or
// {thrown} with the error (and its cause, where undici says what happened on the socket).
const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
try {
  const response = await fetch(input.url, {
    method: "POST",
    headers: { authorization: `Bearer ${input.token}`, "content-type": "application/json" },
    body: " ".repeat(input.size),
  });
  console.log(JSON.stringify({ status: response.status, body: await response.json() }));
} catch (error) {
  const cause = error?.cause ? `: ${error.cause.code ?? ""} ${error.cause.message ?? ""}` : "";
  console.log(JSON.stringify({ thrown: `${error?.message ?? error}${cause}` }));
}
