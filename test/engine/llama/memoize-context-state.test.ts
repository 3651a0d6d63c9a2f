import {
  type ChatHistoryItem,
  ChatMLChatWrapper,
  type ChatWrapper,
  LlamaChat,
  type LlamaContext,
  type LlamaModel,
  resolveChatWrapper,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { memoizeContextState } from "../../../src/engine/llama/memoize-context-state.ts";
import { renderPrompt } from "../../../src/engine/llama/render-prompt.ts";
import { getTestModelPath } from "../../support/test-model.ts";

/** Counts the renders that really happen under the memo. */
function spyOnRenders(chatWrapper: ChatWrapper) {
  const original = chatWrapper.generateContextState.bind(chatWrapper);
  const render = vi.fn(original);
  chatWrapper.generateContextState = render;
  return render;
}

const history: ChatHistoryItem[] = [
  { type: "system", text: "You are terse." },
  { type: "user", text: "Hello there" },
  { type: "model", response: [] },
];

describe("memoizeContextState", () => {
  it("hands a render to the next identical call once, then renders again", () => {
    const chatWrapper = new ChatMLChatWrapper();
    const render = spyOnRenders(chatWrapper);
    memoizeContextState(chatWrapper);
    const first = chatWrapper.generateContextState({ chatHistory: history });
    const second = chatWrapper.generateContextState({ chatHistory: structuredClone(history) });
    expect(second).toBe(first);
    expect(render).toHaveBeenCalledTimes(1);
    chatWrapper.generateContextState({ chatHistory: history });
    expect(render).toHaveBeenCalledTimes(2);
  });

  it("keeps renders of different options apart", () => {
    const chatWrapper = new ChatMLChatWrapper();
    const render = spyOnRenders(chatWrapper);
    memoizeContextState(chatWrapper);
    const plain = chatWrapper.generateContextState({ chatHistory: history });
    const documented = chatWrapper.generateContextState({
      chatHistory: history,
      documentFunctionParams: true,
    });
    const other = chatWrapper.generateContextState({
      chatHistory: [
        { type: "user", text: "Something else" },
        { type: "model", response: [] },
      ],
    });
    expect(render).toHaveBeenCalledTimes(3);
    expect(documented).not.toBe(plain);
    expect(other.contextText.toString()).toContain("Something else");
  });

  it("drops the oldest renders beyond its size", () => {
    const chatWrapper = new ChatMLChatWrapper();
    const render = spyOnRenders(chatWrapper);
    memoizeContextState(chatWrapper, { maxEntries: 2 });
    const ask = (text: string) =>
      chatWrapper.generateContextState({
        chatHistory: [
          { type: "user", text },
          { type: "model", response: [] },
        ],
      });
    ask("a");
    ask("b");
    ask("c");
    ask("a");
    expect(render).toHaveBeenCalledTimes(4);
    ask("c");
    expect(render).toHaveBeenCalledTimes(4);
  });

  // Regression: renders of requests refused after they were prepared were never taken back, and
  // only 64 newer ones pushed them out: large ones held hundreds of megabytes.
  it("drops the oldest renders beyond its characters, and keeps none larger than them all", () => {
    const chatWrapper = new ChatMLChatWrapper();
    const render = spyOnRenders(chatWrapper);
    memoizeContextState(chatWrapper, { maxKeyCharacters: 2_500 });
    const ask = (text: string) =>
      chatWrapper.generateContextState({
        chatHistory: [
          { type: "user", text },
          { type: "model", response: [] },
        ],
      });
    const kilobyte = (letter: string) => letter.repeat(1_000);
    ask(kilobyte("a"));
    ask(kilobyte("b"));
    // A third kilobyte passes 2,500 characters of keys: the oldest goes.
    ask(kilobyte("c"));
    ask(kilobyte("b"));
    expect(render).toHaveBeenCalledTimes(3);
    ask(kilobyte("a"));
    expect(render).toHaveBeenCalledTimes(4);
    // Larger than the allowance: rendered every time, never kept.
    ask("d".repeat(3_000));
    ask("d".repeat(3_000));
    expect(render).toHaveBeenCalledTimes(6);
  });
});

describe("memoizeContextState with LlamaChat", () => {
  let model: LlamaModel;
  let context: LlamaContext;

  beforeAll(async () => {
    const llama = await getSharedLlama({ gpu: false });
    model = await llama.loadModel({ modelPath: await getTestModelPath() });
    context = await model.createContext({ sequences: 1, contextSize: 1024, threads: 1 });
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
  });

  // Pins the options LlamaChat renders with: if a node-llama-cpp upgrade changes them, counting
  // no longer saves LlamaChat's render, and this test says so.
  it("lets LlamaChat reuse the render that counted the prompt, with and without functions", async () => {
    const chatWrapper = resolveChatWrapper(model);
    const render = spyOnRenders(chatWrapper);
    memoizeContextState(chatWrapper);
    const sequence = context.getSequence();
    const chat = new LlamaChat({ contextSequence: sequence, chatWrapper });
    const request = history.slice(0, 2);
    const functions = {
      get_weather: {
        description: "The weather in a city.",
        params: convertJsonSchemaToGbnf(
          { type: "object", properties: { city: { type: "string" } } },
          { param: "tools[0].function.parameters" },
        ),
      },
    };
    for (const offered of [undefined, functions]) {
      render.mockClear();
      await sequence.clearHistory();
      renderPrompt({ chatWrapper, tokenizer: model.tokenizer, history: request, functions: offered });
      await chat.generateResponse(request, {
        maxTokens: 1,
        temperature: 0,
        ...(offered === undefined ? {} : { functions: offered, documentFunctionParams: true }),
      });
      expect(render).toHaveBeenCalledTimes(1);
    }
    chat.dispose({ disposeSequence: true });
  });
});
