/**
 * The reason an engine's close signal aborts with: made once, so that it holds no stack of the
 * call that closed the engine. `abort()` made a new one at each close, whose stack frames V8 keeps
 * with their closures until the stack is read: the close of an engine a reload replaced runs from
 * the watcher of its replacement, so each closed engine held the next, back to the first (found
 * by a soak: 19 llama models, contexts and grammars alive after 18 reloads).
 */
export const ENGINE_CLOSED = new DOMException("The engine was closed.", "AbortError");
