// The AI SDK's default OpenAI provider (createOpenAI(...)(model) calls POST /responses)
// against the agent's /v1/responses, with generateText and streamText.
//
// Input (AGENTLOOP_TEST_INPUT): {baseURL, token, cases: [{name, mode: "generate"|"stream",
// model, system?, messages}]}. Prints one JSON object: for each case's name, what the
// library made of the answer (text, usage, finish reason, response metadata, errors).
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
const openai = createOpenAI({ baseURL: input.baseURL, apiKey: input.token });

function describe(error) {
  return {
    name: error?.name ?? null,
    message: String(error?.message ?? error),
    statusCode: error?.statusCode ?? null,
    isRetryable: error?.isRetryable ?? null,
  };
}

async function generate(request) {
  const result = await generateText(request);
  return {
    text: result.text,
    usage: result.usage,
    finishReason: result.finishReason,
    rawFinishReason: result.rawFinishReason ?? null,
    responseId: result.response.id,
    modelId: result.response.modelId,
    errors: [],
  };
}

async function stream(request) {
  const errors = [];
  const result = streamText({ ...request, onError: ({ error }) => errors.push(describe(error)) });
  const deltas = [];
  for await (const delta of result.textStream) {
    deltas.push(delta);
  }
  const response = await result.response;
  return {
    deltas,
    text: await result.text,
    usage: await result.usage,
    finishReason: await result.finishReason,
    rawFinishReason: (await result.rawFinishReason) ?? null,
    responseId: response.id,
    modelId: response.modelId,
    errors,
  };
}

const results = {};
for (const c of input.cases) {
  const request = { model: openai(c.model), system: c.system, messages: c.messages };
  try {
    results[c.name] = await (c.mode === "generate" ? generate(request) : stream(request));
  } catch (error) {
    results[c.name] = { thrown: describe(error) };
  }
}
console.log(JSON.stringify(results));
