import type { ChatHistoryItem, ChatModelFunctions, ChatWrapper, Tokenizer } from "node-llama-cpp";

/**
 * Counts the prompt tokens of a history exactly as LlamaChat renders it for generation: the same
 * chat wrapper, an empty model response appended for the model to fill in, the same functions
 * (documented with their parameters), then the model's tokenizer.
 */
export function countPromptTokens(options: {
  chatWrapper: ChatWrapper;
  tokenizer: Tokenizer;
  history: readonly ChatHistoryItem[];
  functions: ChatModelFunctions | undefined;
}): number {
  const { history } = options;
  const chatHistory: ChatHistoryItem[] =
    history.at(-1)?.type === "model" ? [...history] : [...history, { type: "model", response: [] }];
  // The options exactly as LlamaChat passes them (run-llama-generation.ts documents parameters
  // only when it offers functions), so a memoized render (memoize-context-state.ts) is reused.
  const { contextText } = options.chatWrapper.generateContextState({
    chatHistory,
    availableFunctions: options.functions,
    documentFunctionParams: options.functions === undefined ? undefined : true,
  });
  return contextText.tokenize(options.tokenizer).length;
}
