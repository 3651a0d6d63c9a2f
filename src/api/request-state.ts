/**
 * What the HTTP edge keeps of each request it answers (its key, its log line's fields, whether
 * it was recorded), and the three ways the edge and its routes reach it: kept apart from
 * build-app.ts, which wires the hooks that fill it.
 */
import type { RequestKey } from "../chat/request-key.ts";

export type LogFields = Record<string, string | number | boolean | undefined>;

/** What the edge keeps of one request: its key, its log line's fields, whether it was recorded. */
interface RequestState {
  key: RequestKey | undefined;
  fields: LogFields | undefined;
  recorded: boolean;
  /** Its route records it when its connection closes early (a chat request once settled). */
  recordsItself?: boolean;
  /**
   * The model as the client named it, whole (the log line's `model` may be cut, or a pasted key
   * in it hidden): the metrics' label once it is found to be a catalogue id.
   */
  modelId: string | undefined;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Set on first use; declared on every request (`decorateRequest`) so they keep one shape. */
    tollgateState: RequestState | null;
  }
}

/**
 * The request's state, kept on the request itself: a WeakMap (or WeakSet) keyed by requests
 * makes every short-lived request an ephemeron the garbage collector has to trace (it showed in
 * callgrind profiles of the gateway benchmark), for nothing a property cannot do.
 */
export function stateOf(request: object): RequestState {
  const holder = request as { tollgateState: RequestState | null };
  holder.tollgateState ??= { key: undefined, fields: undefined, recorded: false, modelId: undefined };
  return holder.tollgateState;
}

export function annotate(request: object, fields: LogFields): void {
  const state = stateOf(request);
  if (state.fields === undefined) state.fields = { ...fields };
  else Object.assign(state.fields, fields);
}

/** Keeps the model a request names, whole, for its metrics (see `modelId`). */
export function nameModel(request: object, modelId: string): void {
  stateOf(request).modelId = modelId;
}

export function getKey(request: object): RequestKey {
  const key = stateOf(request).key;
  if (key === undefined) throw new Error("route reached without authentication");
  return key;
}
