import type {
  ChatWrapper,
  ChatWrapperGenerateContextStateOptions,
  ChatWrapperGeneratedContextState,
} from "node-llama-cpp";

/** Renders kept at most: enough for the requests prepared but not yet started. */
const defaultMaxEntries = 64;
/**
 * Characters of render keys (the JSON of their options, in proportion to the render's own size)
 * kept at most. A request refused after it was prepared (403, 429, a prompt too long) never takes
 * its render back, and the renders of normal requests are taken at once, so stale ones were only
 * pushed out by 64 newer stale ones: 66 refused requests with 4 MB of tools each held half a
 * gigabyte with nothing running.
 */
const defaultMaxKeyCharacters = 4 * 1024 * 1024;

/**
 * Makes a chat wrapper render each prompt once instead of twice.
 *
 * `prepare` renders a request's history to count its prompt tokens; when the request runs,
 * LlamaChat renders the very same history again with the same wrapper (a Jinja template takes
 * about half a millisecond for a short chat, on the time to first token). The wrapper's
 * `generateContextState` is replaced on this instance by one that keeps each render, keyed by
 * the JSON of its options, until the next identical call takes it. Entries are taken once, so
 * every render is used at most twice; the oldest are dropped beyond `maxEntries`, or beyond
 * `maxKeyCharacters` of keys (a request whose render was dropped is simply rendered again). Rendering is a pure function of the options, so a
 * kept render is the render LlamaChat would have made.
 *
 * Returns the wrapper's own render, which keeps nothing: for prompts that LlamaChat will not render
 * again (the direct path, generate-directly.ts), whose renders would otherwise wait in the memo
 * until dropped.
 */
export function memoizeContextState(
  chatWrapper: ChatWrapper,
  options: { maxEntries?: number; maxKeyCharacters?: number } = {},
): (renderOptions: ChatWrapperGenerateContextStateOptions) => ChatWrapperGeneratedContextState {
  const maxEntries = options.maxEntries ?? defaultMaxEntries;
  const maxKeyCharacters = options.maxKeyCharacters ?? defaultMaxKeyCharacters;
  const render = chatWrapper.generateContextState.bind(chatWrapper);
  const renders = new Map<string, ChatWrapperGeneratedContextState>();
  let keyCharacters = 0;
  chatWrapper.generateContextState = (renderOptions: ChatWrapperGenerateContextStateOptions) => {
    const key = JSON.stringify([
      renderOptions.chatHistory,
      renderOptions.availableFunctions ?? null,
      renderOptions.documentFunctionParams ?? null,
    ]);
    const kept = renders.get(key);
    if (kept !== undefined) {
      renders.delete(key);
      keyCharacters -= key.length;
      return kept;
    }
    const rendered = render(renderOptions);
    // One render larger than the whole allowance is not kept: it is rendered again if it runs.
    if (key.length > maxKeyCharacters) return rendered;
    renders.set(key, rendered);
    keyCharacters += key.length;
    for (const oldest of renders.keys()) {
      if (renders.size <= maxEntries && keyCharacters <= maxKeyCharacters) break;
      renders.delete(oldest);
      keyCharacters -= oldest.length;
    }
    return rendered;
  };
  return render;
}
