import type {
  ChatHistoryItem,
  ChatModelFunctions,
  ChatWrapper,
  ChatWrapperGenerateContextStateOptions,
  ChatWrapperGeneratedContextState,
  Token,
  Tokenizer,
} from "node-llama-cpp";

/** A history rendered for generation: the chat wrapper's context state and its prompt tokens. */
export interface RenderedPrompt {
  state: ChatWrapperGeneratedContextState;
  tokens: Token[];
}

/**
 * Renders a history exactly as LlamaChat renders it for generation: the same chat wrapper, an
 * empty model response appended for the model to fill in, the same functions (documented with
 * their parameters), then the model's tokenizer. `render` defaults to the wrapper's (memoized,
 * see memoize-context-state.ts) `generateContextState`.
 */
export function renderPrompt(options: {
  chatWrapper: ChatWrapper;
  tokenizer: Tokenizer;
  history: readonly ChatHistoryItem[];
  functions: ChatModelFunctions | undefined;
  render?: (renderOptions: ChatWrapperGenerateContextStateOptions) => ChatWrapperGeneratedContextState;
}): RenderedPrompt {
  const { history } = options;
  const chatHistory: ChatHistoryItem[] =
    history.at(-1)?.type === "model" ? [...history] : [...history, { type: "model", response: [] }];
  const render = options.render ?? options.chatWrapper.generateContextState.bind(options.chatWrapper);
  // The options exactly as LlamaChat passes them (run-llama-generation.ts documents parameters
  // only when it offers functions), so a memoized render (memoize-context-state.ts) is reused.
  const state = render({
    chatHistory,
    availableFunctions: options.functions,
    documentFunctionParams: options.functions === undefined ? undefined : true,
  });
  return { state, tokens: state.contextText.tokenize(options.tokenizer) };
}
