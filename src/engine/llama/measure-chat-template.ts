import type { ChatHistoryItem, ChatModelFunctionCall, ChatWrapper, Tokenizer } from "node-llama-cpp";
import { renderPrompt } from "./render-prompt.ts";

/** What a model's chat template surely adds to a prompt, measured once when the model loads. */
export interface ChatTemplateMeasures {
  /** The fewest template tokens per history item (role markers, separators); 0 when unknown. */
  tokensPerItem: number;
  /**
   * The fewest template tokens per tool call in a model response, its result included (a call's
   * markers, its name and arguments keys, the result's turn); 0 when unknown.
   */
  tokensPerCall: number;
  /**
   * Whether the template writes each documented tool's parameter schema as its JSON (node-llama-cpp's
   * Jinja, Llama 3.1, Qwen wrappers), rather than as TypeScript-like types or not at all.
   */
  documentsParametersAsJson: boolean;
}

/**
 * Measures what the chat wrapper adds to a prompt (see {@link ChatTemplateMeasures}), for the
 * prompt's size check (check-prompt-size.ts). Each count renders a small empty history twice, with
 * fewer and more items (or calls): the tokens the added ones bring, shared among them, rounded
 * down. A template that cannot render them bounds nothing (0); the render of a request checks it
 * later.
 */
export function measureChatTemplate(options: {
  chatWrapper: ChatWrapper;
  tokenizer: Tokenizer;
  render: ChatWrapper["generateContextState"];
}): ChatTemplateMeasures {
  const count = (history: ChatHistoryItem[]) =>
    renderPrompt({ ...options, history, functions: undefined }).tokens.length;
  const attempt = (measure: () => number) => {
    try {
      return Math.max(0, measure());
    } catch {
      return 0;
    }
  };
  const pairs = (total: number) => {
    const history: ChatHistoryItem[] = [];
    for (let pair = 0; pair < total; pair++)
      history.push({ type: "user", text: "" }, { type: "model", response: [""] });
    history.push({ type: "user", text: "" });
    return history;
  };
  const calls = (total: number, last: boolean) => {
    const response = Array.from({ length: total }, (_, index) => emptyCall(index === 0));
    const history: ChatHistoryItem[] = [
      { type: "user", text: "" },
      { type: "model", response },
    ];
    // A call in the reply being continued may render otherwise than one in an earlier turn.
    if (!last) history.push({ type: "user", text: "" });
    return history;
  };
  const perCall = (last: boolean) => Math.floor((count(calls(3, last)) - count(calls(1, last))) / 2);
  return {
    tokensPerItem: attempt(() => Math.floor((count(pairs(3)) - count(pairs(1))) / 4)),
    // One token less: a call's name or arguments may merge with a quote of the template's.
    tokensPerCall: attempt(() => Math.min(perCall(false), perCall(true)) - 1),
    documentsParametersAsJson: attemptTest(() => {
      const text = renderPrompt({
        ...options,
        history: [{ type: "user", text: "" }],
        functions: { probe_tool: { params: probeParameters } },
      }).state.contextText.toString();
      return text.replace(/\s+/g, "").includes(JSON.stringify(probeParameters));
    }),
  };
}

/** Parameters in an order no sorting keeps, and a keyword that TypeScript-like types do not write. */
const probeParameters = {
  type: "object",
  properties: { probe_list: { type: "array", items: { type: "integer" } } },
} as const;

/** A call with nothing in it: what a call adds beyond its name, arguments and result. */
function emptyCall(startsNewChunk: boolean): ChatModelFunctionCall {
  return { type: "functionCall", name: "", params: "", result: "", startsNewChunk };
}

function attemptTest(test: () => boolean): boolean {
  try {
    return test();
  } catch {
    return false;
  }
}
