import type { StreamPart, Usage } from "../engine.ts";
import { boundUsage, completionTokensAtMost, type UsageBounds } from "./bound-usage.ts";
import { convertUsage, mergeUsage } from "./convert-usage.ts";
import { createToolCallId } from "./create-tool-call-id.ts";
import { estimateTextTokens } from "./estimate-tokens.ts";
import { isBlank } from "./is-blank.ts";
import { isWholeJson } from "./is-whole-json.ts";
import { LogprobsCarrier } from "./logprobs-carrier.ts";
import { readArguments } from "./read-arguments.ts";
import { readDeltaContent } from "./read-delta-content.ts";
import { readErrorBody, type UpstreamErrorBody } from "./read-error-body.ts";
import type { UpstreamChoice, UpstreamChunk, UpstreamToolCallDelta, UpstreamUsage } from "./upstream-wire.ts";

/** Turns upstream `chat.completion.chunk` events into engine parts, and keeps what the end needs. */
export interface ChunkMapper {
  /**
   * Reads one parsed event and appends its parts to `parts`. Returns the upstream's error when
   * the event is an error (`{"error": ...}` or `event: error`), else `undefined`.
   */
  read(chunk: unknown, parts: StreamPart[], eventName?: string): UpstreamErrorBody | undefined;
  /**
   * Ends the answer (the stream ended or broke), appending to `parts` what is still owed: a code
   * unit held back (see {@link createChunkMapper}); the calls held back, in order; a call that
   * never got a name, with an empty one; `{}` as the arguments of a call that got none; and log
   * probabilities still pending (logprobs-carrier.ts).
   */
  flush(parts: StreamPart[]): void;
  /** The upstream's `finish_reason`, once one came. */
  readonly rawFinishReason: string | undefined;
  /** Whether the response called at least one tool. */
  readonly calledTools: boolean;
  /** The answer's text so far (its content deltas joined; not refusals or reasoning). */
  readonly contentSoFar: string;
  /**
   * The usage the upstream reported, if it did: its reports merged count by count, a later count
   * replacing an earlier one (counts it never sent stay `undefined`).
   */
  readonly reportedUsage: Usage | undefined;
  /**
   * Whether the last usage report came after all the output so far (text, refusals, reasoning,
   * tool calls), so that it could count it. False before any report and once output followed
   * the last one: an upstream that sends usage early (a prompt count in the first chunk, or
   * zeros on every chunk) has not counted what came next. A report in the same chunk as output
   * counts it, as servers that report usage on every chunk do.
   */
  readonly usageCoversOutput: boolean;
  /** Estimated tokens of everything produced so far: text, refusals, tool names and arguments. */
  estimateCompletionTokens(): number;
  /** Characters produced so far (text, refusals, tool names and arguments), for the caller to bound. */
  readonly producedLength: number;
  /** The UTF-8 bytes of what {@link producedLength} counts: no text has more tokens than bytes. */
  readonly producedBytes: number;
  /**
   * The UTF-8 bytes of the reasoning among {@link producedBytes}: some upstreams do not count it
   * within `max_tokens` (DeepSeek's reasoner bounds only the answer after it).
   */
  readonly reasoningBytes: number;
  /**
   * About the characters of the log probabilities passed on so far (see read-logprobs.ts), for
   * the caller to bound with the answer; 0 unless the request asked for them.
   */
  readonly logprobsLength: number;
  /**
   * The upstream's own counts where they were more than the request can have used (the usage
   * read holds the bounds instead); `undefined` while none was.
   */
  readonly usageBeyondBounds: { promptTokens?: number; completionTokens?: number } | undefined;
  /** The most completion tokens the answer is charged, whatever came (see UsageBounds); none without bounds. */
  readonly completionCap: number | undefined;
  /**
   * Whether the upstream's last usage report counted more answer tokens (besides the reasoning it
   * counted) than the `max_tokens` it was sent allows (with the reasoning it streamed): it
   * generated past it, so the answer ended for its length, whatever finish reason it gave.
   */
  readonly ignoredMaxTokens: boolean;
}

/** Tokens a tool call adds beyond its name and arguments (its markers), as templates render one. */
const TOKENS_PER_TOOL_CALL = 4;

interface ToolCallState {
  /** Position among this response's calls, as the client sees it. */
  index: number;
  id: string | undefined;
  name: string | undefined;
  /** The argument fragments so far, sent or not. */
  arguments: string;
  /** Whether the call's first delta went out: its later fragments then go out as they come. */
  sent: boolean;
  /** A high surrogate its sent arguments ended with, held back for the next fragment (or ""). */
  held: string;
  /** Where reading its arguments as JSON has got to (see {@link readJsonShape}). */
  shape: JsonShape;
}

/**
 * How far a JSON text read a fragment at a time has got: the arrays and objects open, whether in
 * a string (and after a backslash in it), and whether one opened and closed again (a whole
 * value, for arguments). Kept as they come, a fragment's length each: parsing the arguments again
 * at every fragment costs their length each time.
 */
interface JsonShape {
  depth: number;
  inString: boolean;
  escaped: boolean;
  whole: boolean;
}

/** Reads `fragment` on from `shape`. */
function readJsonShape(shape: JsonShape, fragment: string): void {
  for (let index = 0; index < fragment.length; index++) {
    const code = fragment.charCodeAt(index);
    if (shape.inString) {
      if (shape.escaped) shape.escaped = false;
      else if (code === 0x5c) shape.escaped = true;
      else if (code === 0x22) shape.inString = false;
    } else if (code === 0x22) shape.inString = true;
    else if (code === 0x7b || code === 0x5b) shape.depth += 1;
    else if ((code === 0x7d || code === 0x5d) && shape.depth > 0) {
      shape.depth -= 1;
      if (shape.depth === 0) shape.whole = true;
    }
  }
}

/**
 * Maps upstream chunks (choice 0; Tollgate never asks for more) to parts. Text deltas pass
 * through; tool-call deltas are re-assembled so that each call's first part carries its id and
 * name and the later ones only argument fragments, whatever the upstream does: calls keyed by
 * `index` (or by `id`, or the last call, where an upstream leaves the index out), a missing id
 * made up, a name sent in pieces joined (the first delta waits for a delta with arguments),
 * fragments that came before the name held back until it comes, and a new id at an index already
 * in use read as a new call (servers that send every call whole at index 0).
 *
 * Calls go out one after another, as OpenAI sends them: clients (the openai SDK's stream helpers
 * among them) take a delta for a later call as the end of the one before. An upstream that
 * interleaves parallel calls has the later ones held back until the earlier ones are over (see
 * `#beginCall`). A call that ends with no arguments (vLLM, gateways and bridges send no-parameter
 * calls so) gets `{}`, as OpenAI sends it: a tool's arguments are always a JSON object. Arguments
 * that came are passed on as they are, valid JSON or not.
 *
 * A text, refusal or arguments fragment that ends with a high surrogate (an upstream that splits a
 * character outside the BMP, an emoji, between two deltas as escaped halves) has it held back and
 * put before the next fragment of the same text or call: sent apart, each half would be a lone
 * surrogate in its event's JSON, which the client cannot decode as UTF-8. What is held goes out at
 * `flush`, so nothing is lost. Only what is sent is cut: the text kept for the estimate is whole.
 *
 * An error the upstream sends is read with `secrets`, the endpoint's (see
 * create-upstream-endpoint.ts), removed from it: it may repeat the credentials it was sent. The
 * endpoint's `names` (list-endpoint-names.ts) are replaced in it too. Default none.
 *
 * With `logprobs` (the request asked for them), a choice's `logprobs` are read (read-logprobs.ts:
 * checked, rebuilt, dropped where malformed) and go out with the parts made from the same chunk
 * (logprobs-carrier.ts). Without it they are not looked at: the client did not ask, and its
 * answer stays as it was.
 *
 * A class rather than a closure: a request makes one, and an object literal with getters costs
 * several runtime calls to build where a class instance costs an allocation.
 */
export function createChunkMapper(
  secrets: readonly string[],
  names: readonly string[] = [],
  bounds?: UsageBounds,
  logprobs = false,
): ChunkMapper {
  return new UpstreamChunkMapper(secrets, names, bounds, logprobs);
}

class UpstreamChunkMapper implements ChunkMapper {
  readonly #secrets: readonly string[];
  readonly #names: readonly string[];
  readonly #texts: string[] = [];
  /** The content deltas among {@link #texts} (not refusals), for {@link contentSoFar}. */
  readonly #contents: string[] = [];
  /** The high surrogate the text sent so far ended with, held back (or ""); the same for the refusal. */
  #heldText = "";
  #heldRefusal = "";
  /**
   * Reasoning the upstream streamed beside the answer (vLLM's `reasoning_content`, Ollama's and
   * OpenRouter's `reasoning`, Mistral's `thinking` parts): never sent to the client, but generated
   * and paid for upstream, so it counts where the completion tokens are estimated.
   */
  readonly #reasoning: string[] = [];
  readonly #calls: ToolCallState[] = [];
  readonly #callsByKey = new Map<number | string, ToolCallState>();
  #lastCall: ToolCallState | undefined;
  /** The call whose fragments go out as they come: the ones before it are over, the ones after it wait. */
  #sendingIndex = 0;
  /** A call began while the one being sent could still grow: all later ones wait for the end. */
  #holding = false;
  rawFinishReason: string | undefined;
  reportedUsage: Usage | undefined;
  producedLength = 0;
  producedBytes = 0;
  reasoningBytes = 0;
  /** Where the request asked for log probabilities: what takes them to the parts. */
  readonly #logprobs: LogprobsCarrier | undefined;
  /** Reasoning came since the last chunk's log probabilities were read. */
  #reasoned = false;
  /** {@link producedLength} when the last usage report came. */
  #producedAtReport: number | undefined;

  readonly #bounds: UsageBounds | undefined;
  /** The `reasoning_tokens` of the last usage report, where it told them. */
  reportedReasoningTokens: number | undefined;
  /** The upstream's own counts, where they were more than the request can have used. */
  usageBeyondBounds: { promptTokens?: number; completionTokens?: number } | undefined;

  constructor(
    secrets: readonly string[],
    names: readonly string[],
    bounds: UsageBounds | undefined,
    logprobs: boolean,
  ) {
    this.#secrets = secrets;
    this.#names = names;
    this.#bounds = bounds;
    this.#logprobs = logprobs ? new LogprobsCarrier() : undefined;
  }

  get logprobsLength(): number {
    return this.#logprobs?.length ?? 0;
  }

  get completionCap(): number | undefined {
    return this.#bounds === undefined ? undefined : completionTokensAtMost(this.#bounds, this);
  }

  get ignoredMaxTokens(): boolean {
    const bounds = this.#bounds;
    const beyond = this.usageBeyondBounds?.completionTokens;
    const cap = this.completionCap;
    if (bounds?.completionSent !== true || beyond === undefined || cap === undefined) return false;
    // The reasoning it counted (`reasoning_tokens`, streamed or not) is no answer past the bound:
    // some upstreams bound only the answer after it. Where it counted none, the cap allows for
    // the reasoning it streamed.
    const reasoning = this.reportedReasoningTokens ?? 0;
    return reasoning > 0 ? beyond - reasoning > bounds.completionTokens : beyond > cap;
  }

  get contentSoFar(): string {
    return this.#contents.join("");
  }

  get calledTools(): boolean {
    return this.#calls.length > 0;
  }

  get usageCoversOutput(): boolean {
    return this.#producedAtReport === this.producedLength;
  }

  read(value: unknown, parts: StreamPart[], eventName?: string): UpstreamErrorBody | undefined {
    // Whatever an error event holds is its error: an object, or a bare message.
    if (eventName === "error")
      return readErrorBody(JSON.stringify(value), this.#secrets, { names: this.#names });
    if (typeof value !== "object" || value === null) return undefined;
    const chunk = value as UpstreamChunk;
    if (chunk.error !== undefined && chunk.error !== null) {
      return readErrorBody(JSON.stringify({ error: chunk.error }), this.#secrets, { names: this.#names });
    }
    // A choice sent bare, not in an array (a broken server), is read as the one it is: dropped,
    // its text was charged for (the upstream's usage counts it) but never sent.
    if (Array.isArray(chunk.choices)) this.#readChoices(chunk.choices as unknown[], parts);
    else if (typeof chunk.choices === "object" && chunk.choices !== null)
      this.#readChoices([chunk.choices], parts);
    // Read after the chunk's output, which it counts (see usageCoversOutput).
    const sent = chunk.usage ?? readGroqUsage(chunk.x_groq);
    const usage = sent === undefined || sent === null ? undefined : convertUsage(sent);
    if (usage !== undefined) {
      const merged = mergeUsage(this.reportedUsage, usage);
      // Read first: the bounds allow for no more reasoning than the upstream counted.
      this.reportedReasoningTokens = merged.details?.completion?.reasoning_tokens;
      const bounded = this.#bounds === undefined ? undefined : boundUsage(merged, this.#bounds, this);
      // As the last report stands: an early one past the bounds that a later one, with the
      // reasoning since, falls within was logged as charged at the bound, though it was not.
      this.usageBeyondBounds = bounded?.beyond;
      this.reportedUsage = bounded?.usage ?? merged;
      this.#producedAtReport = this.producedLength;
    }
    return undefined;
  }

  #readChoices(choices: readonly unknown[], parts: StreamPart[]): void {
    for (const choice of choices) {
      if (typeof choice !== "object" || choice === null) continue;
      const { index, delta, finish_reason: finishReason } = choice as UpstreamChoice;
      // Choice 0, also where its index came as a string ("0").
      if (index !== undefined && index !== 0 && (index as unknown) !== "0") continue;
      const partsBefore = parts.length;
      if (delta !== undefined && delta !== null) {
        const content = readDeltaContent(delta.content, this.#addReasoning);
        if (content !== "") {
          this.#texts.push(content);
          this.#contents.push(content);
          this.#produced(content);
          this.#heldText = pushText(parts, "text-delta", this.#heldText + content);
        }
        // One of the two names: servers that send both (vLLM's and mlx-vlm's compatibility
        // alias) send the same text twice, which counted twice overcharged the estimate.
        const reasoning =
          typeof delta.reasoning_content === "string" && delta.reasoning_content !== ""
            ? delta.reasoning_content
            : delta.reasoning;
        if (typeof reasoning === "string") this.#addReasoning(reasoning);
        // OpenAI's structured outputs say why they declined here, not in the content.
        if (typeof delta.refusal === "string" && delta.refusal !== "") {
          this.#texts.push(delta.refusal);
          this.#produced(delta.refusal);
          this.#heldRefusal = pushText(parts, "refusal-delta", this.#heldRefusal + delta.refusal);
        }
        if (Array.isArray(delta.tool_calls)) {
          for (const call of delta.tool_calls as unknown[]) {
            if (typeof call === "object" && call !== null)
              this.#readToolCall(call as UpstreamToolCallDelta, parts);
          }
        }
      }
      if (this.#logprobs !== undefined) {
        this.#logprobs.read((choice as UpstreamChoice).logprobs, parts, partsBefore, this.#reasoned);
        this.#reasoned = false;
      }
      if (typeof finishReason === "string" && finishReason !== "") this.rawFinishReason = finishReason;
    }
  }

  /** Keeps reasoning text for the estimate: held in memory, so bounded with the answer. */
  readonly #addReasoning = (text: string): void => {
    if (text === "") return;
    this.#reasoned = true;
    this.#reasoning.push(text);
    this.reasoningBytes += this.#produced(text);
  };

  /** Counts `text` as produced, in characters and in bytes; answers its bytes. */
  #produced(text: string): number {
    const bytes = Buffer.byteLength(text, "utf8");
    this.producedLength += text.length;
    this.producedBytes += bytes;
    return bytes;
  }

  flush(parts: StreamPart[]): void {
    const partsBefore = parts.length;
    if (this.#heldText !== "") parts.push({ type: "text-delta", text: this.#heldText.toWellFormed() });
    if (this.#heldRefusal !== "")
      parts.push({ type: "refusal-delta", text: this.#heldRefusal.toWellFormed() });
    this.#heldText = this.#heldRefusal = "";
    // A call that is over holds nothing unless the upstream sent more after its whole JSON.
    for (let index = 0; index < this.#sendingIndex; index++)
      releaseArguments(this.#calls[index] as ToolCallState, parts);
    for (let index = this.#sendingIndex; index < this.#calls.length; index++) {
      const call = this.#calls[index] as ToolCallState;
      if (!call.sent) {
        // A call with neither a name nor arguments said nothing: no client could run it.
        if (call.name === undefined && call.arguments === "") continue;
        this.#send(call, call.name ?? "", parts);
      }
      releaseArguments(call, parts);
      if (isBlank(call.arguments))
        parts.push({ type: "tool-call-delta", index: call.index, argumentsDelta: "{}" });
    }
    this.#sendingIndex = this.#calls.length;
    this.#logprobs?.flush(parts, partsBefore);
  }

  estimateCompletionTokens(): number {
    let tokens = estimateTextTokens(this.#texts.join("")) + estimateTextTokens(this.#reasoning.join(""));
    for (const call of this.#calls) {
      tokens +=
        TOKENS_PER_TOOL_CALL + estimateTextTokens(call.name ?? "") + estimateTextTokens(call.arguments);
    }
    return tokens;
  }

  #newCall(key: number | string): ToolCallState {
    const call: ToolCallState = {
      index: this.#calls.length,
      id: undefined,
      name: undefined,
      arguments: "",
      sent: false,
      held: "",
      shape: { depth: 0, inString: false, escaped: false, whole: false },
    };
    if (call.index > 0 && !this.#holding) this.#beginCall(call.index);
    this.#calls.push(call);
    this.#callsByKey.set(key, call);
    return call;
  }

  /**
   * Call `index` began. The call being sent is over once its arguments are a whole JSON object
   * (more text could only break them, so no upstream sends any): the new call goes out as it
   * comes, as calls sent one after another always do. Otherwise the upstream interleaves calls,
   * and it may go on with the earlier one at any time: the later calls wait for the end. Checked
   * once per call, never again while holding, so that no upstream makes the arguments parsed
   * over and over.
   */
  #beginCall(index: number): void {
    const sending = this.#calls[this.#sendingIndex] as ToolCallState;
    if (sending.sent && isWholeJson(sending.arguments)) this.#sendingIndex = index;
    else this.#holding = true;
  }

  #readToolCall(delta: UpstreamToolCallDelta, parts: StreamPart[]): void {
    const id = typeof delta.id === "string" && delta.id !== "" ? delta.id : undefined;
    const name =
      typeof delta.function?.name === "string" && delta.function.name !== ""
        ? delta.function.name
        : undefined;
    const fragment = readArguments(delta.function?.arguments);
    // An entry with no id, name or arguments (Gemini's thought signatures ride alone in
    // `extra_content`) is no call, nor part of one.
    if (id === undefined && name === undefined && fragment === "") return;
    this.#produced(fragment);
    const key: number | string | undefined = readCallIndex(delta.index) ?? id;
    let call = key === undefined ? this.#lastCall : this.#callsByKey.get(key);
    if (call === undefined) call = this.#newCall(key ?? this.#calls.length);
    else if (id !== undefined && call.id !== undefined && id !== call.id && name !== undefined) {
      call = this.#newCall(key ?? this.#calls.length);
    } else if (
      key === undefined &&
      name !== undefined &&
      call.name !== undefined &&
      (name !== call.name || (call.shape.whole && !isBlank(fragment)))
    ) {
      // Neither index nor id (each call sent whole): a name for a call that has one is the next
      // call, but for the call's own name again while its arguments are not whole yet (servers
      // that repeat the name in every delta: each character of the arguments was a call), or
      // with nothing more than white space after them (a last delta that repeats the name with
      // empty arguments made a second call, `{}`).
      call = this.#newCall(this.#calls.length);
    }
    this.#lastCall = call;
    if (fragment !== "") {
      call.arguments += fragment;
      readJsonShape(call.shape, fragment);
    }
    if (call.sent) {
      if (fragment !== "") pushArguments(call, fragment, parts);
      return;
    }
    if (id !== undefined) call.id = id;
    if (name !== undefined) {
      // Only what the name grew by is produced: servers that send it again in every delta (a
      // 64-character name with arguments a character a delta) had a call well within max_tokens
      // counted 65 bytes a character and cut as past it.
      const before = call.name?.length ?? 0;
      call.name = joinName(call.name, name);
      this.#produced(call.name.slice(before));
    }
    // The name is taken as whole once a delta brings arguments (or the call ends: `flush`); a
    // piece of it may still come with them, not after: arguments that came before any name, or
    // only white space, send nothing yet.
    if (call.name !== undefined && !isBlank(fragment) && call.index === this.#sendingIndex)
      this.#send(call, call.name, parts);
  }

  /** Sends a call's first delta, and the arguments that came before it. */
  #send(call: ToolCallState, name: string, parts: StreamPart[]): void {
    call.sent = true;
    call.id ??= createToolCallId();
    // The first delta carries the id and name with no arguments, as OpenAI streams it (SPEC
    // section 4), even where the upstream sent the name and arguments together.
    parts.push({
      type: "tool-call-delta",
      index: call.index,
      id: call.id.toWellFormed(),
      name: name.toWellFormed(),
      argumentsDelta: "",
    });
    if (call.arguments !== "") pushArguments(call, call.arguments, parts);
  }
}

/**
 * A tool call's `index`: a number, or one written as a string (`"1"`), as some servers write the
 * choice's (interleaved calls keyed by their ids, sent in their first deltas only, were mixed).
 */
function readCallIndex(index: unknown): number | undefined {
  if (typeof index === "number") return index;
  return typeof index === "string" && /^\d{1,9}$/.test(index) ? Number(index) : undefined;
}

/**
 * A call's name so far with the `next` an upstream sent: OpenAI sends it whole in the call's
 * first delta, some servers again in every delta, or the name so far, or in pieces (`get_`, then
 * `weather`), which a client would have been told as `get_`, a tool it has not got.
 */
function joinName(name: string | undefined, next: string): string {
  return name === undefined || next.startsWith(name) ? next : name + next;
}

/** How much of `text` can go out now: all of it, but for a high surrogate it ends with. */
function sendableLength(text: string): number {
  const last = text.charCodeAt(text.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? text.length - 1 : text.length;
}

/**
 * Pushes `text` (not empty) as a `type` part, but for a high surrogate it ends with, returned (else
 * ""). A surrogate with no partner in what goes out (an upstream's `\ud800` escape inside a chunk)
 * goes out as U+FFFD: JSON carries it, but a client's UTF-8 encoder fails on it.
 */
function pushText(parts: StreamPart[], type: "text-delta" | "refusal-delta", text: string): string {
  const end = sendableLength(text);
  if (end === text.length) {
    parts.push({ type, text: text.toWellFormed() });
    return "";
  }
  if (end > 0) parts.push({ type, text: text.slice(0, end).toWellFormed() });
  return text.slice(end);
}

/** Pushes a sent call's arguments `fragment` (not empty) after what it held, holding a high surrogate it ends with. */
function pushArguments(call: ToolCallState, fragment: string, parts: StreamPart[]): void {
  const text = call.held + fragment;
  const end = sendableLength(text);
  call.held = end === text.length ? "" : text.slice(end);
  if (end > 0)
    parts.push({
      type: "tool-call-delta",
      index: call.index,
      argumentsDelta: text.slice(0, end).toWellFormed(),
    });
}

/** Pushes what a call held back, at the end. */
function releaseArguments(call: ToolCallState, parts: StreamPart[]): void {
  if (call.held === "") return;
  parts.push({ type: "tool-call-delta", index: call.index, argumentsDelta: call.held.toWellFormed() });
  call.held = "";
}

/** The usage Groq sends in `x_groq` (its final chunk's), where the chunk has none of its own. */
function readGroqUsage(extra: unknown): UpstreamUsage | undefined {
  if (typeof extra !== "object" || extra === null || !("usage" in extra)) return undefined;
  const usage = extra.usage;
  return typeof usage === "object" && usage !== null ? (usage as UpstreamUsage) : undefined;
}
