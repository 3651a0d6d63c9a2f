import type { ChatWrapper, Llama } from "node-llama-cpp";
import type { CatalogModel } from "../../catalog/catalog.ts";
import { AppError } from "../../errors/app-error.ts";
import { redactUrlsInText } from "../../models/download/redact-url.ts";
import { checkContextLength, TOOL_TEXTS_COUNTED } from "../check-context-length.ts";
import type { ChatEngine, ChatRequest, ModelStatus, PreparedChat, PrepareOptions } from "../engine.ts";
import { ENGINE_CLOSED } from "../engine-closed.ts";
import { refuseLocalExtras } from "../refuse-local-extras.ts";
import { refuseLogprobs } from "../refuse-logprobs.ts";
import { createGrammarCache, type GrammarCache } from "./create-grammar-cache.ts";
import { createLeasePool, type LeasePool } from "./create-lease-pool.ts";
import { createPlanGrammar } from "./create-plan-grammar.ts";
import { describeLoadFailure } from "./describe-load-failure.ts";
import { prepareDirectPrompt, supportsDirectGeneration } from "./generate-directly.ts";
import { type LlamaEngineLogger, silentLogger } from "./llama-engine-logger.ts";
import { registerLlamaEngineStats } from "./llama-engine-stats.ts";
import type { GenerationSlot, LoadedLlamaModel } from "./load-llama-model.ts";
import { type ChatTemplateMeasures, measureChatTemplate } from "./measure-chat-template.ts";
import { memoizeContextState } from "./memoize-context-state.ts";
import { planStopStrings } from "./plan-generation.ts";
import { planWithinSize } from "./plan-within-size.ts";
import { type FileIdentity, isSameFileIdentity, readFileIdentity } from "./read-file-identity.ts";
import { readLlamaConfig } from "./read-llama-config.ts";
import { renderPrompt } from "./render-prompt.ts";
import { createDownloadRetries } from "./retry-model-download.ts";
import { runLlamaGeneration } from "./run-llama-generation.ts";
import { createLoadWaiters } from "./wait-for-load.ts";

/** Options of {@link createLlamaEngine}. */
export interface LlamaEngineOptions {
  /** A catalogue chat model whose `engine.type` is `"llama"` and `engine.model` a GGUF file path. */
  model: CatalogModel;
  /** The llama.cpp binding; default: the process-wide one for the model's `gpu` setting. */
  llama?: () => Promise<Llama>;
  logger?: LlamaEngineLogger;
  /**
   * Generates `text` and `json` plans on the direct path (generate-directly.ts) where the chat
   * template allows. Default `true`; `false` sends every plan through LlamaChat (which tests
   * compare the direct path with).
   */
  directGeneration?: boolean;
  /** Waits before the download of the model's file is tried again (retry-model-download.ts). */
  downloadRetryDelays?: readonly number[];
}

/** A loaded model, ready to prepare and run requests. */
interface AvailableState {
  status: "available";
  loaded: LoadedLlamaModel;
  pool: LeasePool<GenerationSlot>;
  grammars: GrammarCache;
  /** Renders without keeping the render for LlamaChat (memoize-context-state.ts). */
  renderOnce: ChatWrapper["generateContextState"];
  /** Whether `text` and `json` plans take the direct path, as far as the chat wrapper goes. */
  direct: boolean;
  /** What the chat template surely adds to a prompt, for its size check (check-prompt-size.ts). */
  template: ChatTemplateMeasures;
}

/** Unavailable: for good (until a reload), or until the download is tried again at `retryAt`. */
type EngineState =
  | { status: "loading" }
  | AvailableState
  | { status: "unavailable"; message: string; retryAt?: number | undefined };

/** How long `close()` waits for aborted generations to hand their sequences back before disposing. */
const closeGraceMilliseconds = 10_000;

/**
 * The local engine: one GGUF model served in-process by node-llama-cpp.
 *
 * Loading starts at once, in the background: `status()` is `loading`, then `available`, or
 * `unavailable` with a message that says how to fix it; a download that failed for a cause that
 * may pass (a refused connection, a 5xx) is tried again in the background, `loading` again while
 * it runs (retry-model-download.ts). `prepare` waits for the load, plans the
 * request (plan-generation.ts) and counts its prompt exactly as it will be rendered; `text` and
 * `json` plans are generated on the direct path (generate-directly.ts) where the chat template
 * allows it, the others by LlamaChat. `run` leases one of the context's `parallel` sequences,
 * waiting in a bounded queue (`maxQueue`, then 503), and streams the generation
 * (run-llama-generation.ts). `close` aborts what runs and waits, rejects what waits, then disposes
 * the context and the model.
 */
export function createLlamaEngine(options: LlamaEngineOptions): ChatEngine {
  const config = readLlamaConfig(options.model);
  const logger = options.logger ?? silentLogger;
  const modelId = options.model.id;
  const closeController = new AbortController();
  let state: EngineState = { status: "loading" };
  let closed = false;
  let retired = false; // a reload replaced it: its pool offers its waiters to the new engine
  let modelLoadError: (abstract new (...args: never[]) => Error) | undefined;
  /** The file being loaded or loaded, as it was when the load began; unknown until it is there. */
  let loadedFile: { path: string; identity: FileIdentity } | undefined;

  const startedAt = performance.now();
  // node-llama-cpp (about 45 MB resident before any model is loaded) is imported only once the
  // model's file is there and passed its checks (load-llama-model.ts), and the binding only when
  // the loader asks for it: a local model whose file is missing costs none of it.
  const getSharedLlama = async () =>
    (await import("./get-shared-llama.ts")).getSharedLlama({
      gpu: config.gpu,
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    });
  let retryingLoad = false;
  const retries = createDownloadRetries({
    delays: options.downloadRetryDelays,
    retry: () => {
      retryingLoad = true;
      loading = startLoading();
    },
  });
  let loading = startLoading();

  function startLoading(): Promise<void> {
    state = { status: "loading" };
    return import("./load-llama-model.ts")
      .then((loader) => {
        modelLoadError = loader.ModelLoadError;
        return loader.loadLlamaModel({
          config,
          configuredContextLength: options.model.contextLength,
          getLlama: options.llama ?? getSharedLlama,
          signal: closeController.signal,
          logger,
          onFile: (file) => {
            loadedFile = file;
          },
        });
      })
      .then(async (loaded) => {
        if (closed) {
          await disposeLoaded(loaded);
          return;
        }
        const renderOnce = memoizeContextState(loaded.chatWrapper);
        state = {
          status: "available",
          loaded,
          pool: createLeasePool({ items: loaded.slots, maxQueue: Math.max(0, config.maxQueue), modelId }),
          grammars: createGrammarCache({ llama: loaded.llama }),
          renderOnce,
          direct: (options.directGeneration ?? true) && supportsDirectGeneration(loaded.chatWrapper),
          template: measureChatTemplate({
            chatWrapper: loaded.chatWrapper,
            tokenizer: loaded.model.tokenizer,
            render: renderOnce,
          }),
        };
        if (retired) state.pool.retire();
        logger.info(
          {
            model: modelId,
            contextLength: loaded.contextLength,
            parallel: loaded.slots.length,
            threads: loaded.threads,
            chatWrapper: loaded.chatWrapper.wrapperName,
            loadMilliseconds: Math.round(performance.now() - startedAt),
          },
          "local model loaded",
        );
      })
      .catch((error: unknown) => {
        const expected = modelLoadError !== undefined && error instanceof modelLoadError ? error : undefined;
        const retry = closed || retired ? undefined : retries.after(error);
        const message = describeLoadFailure({
          modelId,
          error,
          expected,
          retrying: retry !== undefined,
        });
        state = { status: "unavailable", message, retryAt: retry?.at };
        if (closed || retired) return;
        // An expected failure (missing file, no network) is a warning with its reason, not a stack
        // trace; one per attempt, with the time of the next.
        const next = retry && { attempt: retry.attempt - 1, nextAttemptAt: new Date(retry.at).toISOString() };
        if (expected)
          logger.warn({ model: modelId, reason: expected.message, ...next }, "local model unavailable");
        // Its file named (regression: a truncated GGUF was logged with no path, and the client's
        // message no longer names it).
        else
          logger.error(
            { model: modelId, engineModel: redactUrlsInText(config.model), err: error },
            "local model failed to load (err says why; engineModel is its engine.model)",
          );
      });
  }

  const loadWaiters = createLoadWaiters({
    modelId,
    capacity: config.parallel + config.maxQueue,
    loading: () => loading,
  });
  const waitForModel = async (signal: AbortSignal | undefined, tenant: string | undefined) => {
    if (state.status === "loading") await loadWaiters.wait(signal, tenant);
    await loading;
    const current = state;
    if (closed) {
      throw new AppError("model_unavailable", `The model '${modelId}' is shutting down. Please retry.`, {
        retryAfterSeconds: 1,
      });
    }
    // Until an operator replaces the file and reloads: a client told to retry in a second (the
    // SDKs do, twice) would only be refused again. A download tried again later: retry after it.
    if (current.status === "unavailable" && current.retryAt !== undefined) {
      const retryAfterSeconds = Math.max(1, Math.ceil((current.retryAt - Date.now()) / 1000));
      throw new AppError("model_unavailable", current.message, { retryAfterSeconds });
    }
    if (current.status === "unavailable")
      throw new AppError("model_unavailable", current.message, { retryable: false });
    if (current.status !== "available") throw new Error("model state after loading is still loading");
    return current;
  };

  /**
   * Requests being prepared: waiting for the model to load, or being measured. They count as
   * waiting, so that a reload does not close an engine (server.ts) that requests still wait for.
   */
  let preparing = 0;
  const load = () =>
    state.status === "available"
      ? { running: state.pool.leased, waiting: state.pool.waiting + preparing }
      : { running: 0, waiting: preparing };
  const unregisterStats = registerLlamaEngineStats(() => {
    const sequences = state.status === "available" ? state.loaded.slots.length : 0;
    const { running, waiting } = load();
    return {
      model: modelId,
      status: closed ? "unavailable" : state.status,
      sequences,
      leased: running,
      free: sequences - running,
      waiting,
    };
  });

  return {
    get contextLength() {
      return state.status === "available" ? state.loaded.contextLength : undefined;
    },
    supportsMultipleChoices: false,
    refuseUpstreamExtras: (extras) => refuseLocalExtras(extras, modelId),
    status(): ModelStatus {
      return closed ? "unavailable" : state.status;
    },
    get retryingLoad() {
      return retryingLoad;
    },
    load,
    sourceChanged() {
      if (loadedFile === undefined) return false;
      const current = readFileIdentity(loadedFile.path);
      // A file removed and not (yet) replaced changes nothing: the loaded weights stay mapped and
      // keep serving, where a new engine would find no file.
      return current !== undefined && !isSameFileIdentity(current, loadedFile.identity);
    },
    // Loaded: the count prepare would make, without its grammar, its direct prompt or a render
    // kept for LlamaChat (an upstream model asks on every request). Loading, closed, or a request
    // this model cannot take: none.
    async measurePromptTokens(request: ChatRequest): Promise<number | undefined> {
      const current = state;
      if (closed || current.status !== "available") return undefined;
      preparing++;
      try {
        const { plan, history } = await planWithinSize(request, current);
        return renderPrompt({
          chatWrapper: current.loaded.chatWrapper,
          tokenizer: current.loaded.model.tokenizer,
          history,
          functions: plan.kind === "functions" ? plan.functions : undefined,
          render: current.renderOnce,
        }).tokens.length;
      } catch {
        return undefined;
      } finally {
        preparing--;
      }
    },
    async prepare(request: ChatRequest, prepareOptions?: PrepareOptions): Promise<PreparedChat> {
      // The service refuses them first (chat-service.ts); an upstream model's fallback comes here.
      if (request.logprobs !== undefined) throw refuseLogprobs(modelId);
      const refusal =
        request.upstreamExtras === undefined ? undefined : refuseLocalExtras(request.upstreamExtras, modelId);
      if (refusal !== undefined) throw refusal;
      preparing++;
      try {
        const loaded = await waitForModel(prepareOptions?.signal, prepareOptions?.tenant);
        return await prepareLoaded(request, loaded, prepareOptions?.logger ?? logger);
      } finally {
        preparing--;
      }
    },
    retire() {
      retired = true;
      retries.stop();
      if (state.status === "available") state.pool.retire();
    },
    async close() {
      if (closed) return;
      closed = true;
      retries.stop();
      closeController.abort(ENGINE_CLOSED);
      const current = state;
      if (current.status === "available") current.pool.close();
      await loading;
      if (current.status === "available") {
        await Promise.race([
          current.pool.whenIdle(),
          new Promise((resolve) => setTimeout(resolve, closeGraceMilliseconds).unref()),
        ]);
      }
      if (current.status === "available") await disposeLoaded(current.loaded);
      unregisterStats();
    },
  };

  /** Measures a request on the loaded model: prompt tokens, the plan, its grammar and prompt. */
  async function prepareLoaded(
    request: ChatRequest,
    current: AvailableState,
    runLogger: LlamaEngineLogger,
  ): Promise<PreparedChat> {
    const { loaded, pool, grammars, renderOnce, direct } = current;
    const { plan, history, toolSchemas, instruction } = await planWithinSize(request, current);
    const grammar = await createPlanGrammar({ plan, toolSchemas, grammars });
    const directPlan = direct && (plan.kind === "text" || plan.kind === "json");
    const prompt = renderPrompt({
      chatWrapper: loaded.chatWrapper,
      tokenizer: loaded.model.tokenizer,
      history,
      functions: plan.kind === "functions" ? plan.functions : undefined,
      // LlamaChat renders again and takes the kept render; the direct path uses this one.
      ...(directPlan ? { render: renderOnce } : {}),
    });
    const promptTokens = prompt.tokens.length;
    checkContextLength({
      contextLength: loaded.contextLength,
      promptTokens,
      maxTokens: request.maxTokens,
      // Short messages beside long tools: the client learns what to shorten (as before rendering).
      alsoCounted: instruction !== undefined || plan.kind === "functions" ? TOOL_TEXTS_COUNTED : undefined,
    });
    const maxCompletionTokens = request.maxTokens ?? loaded.contextLength - promptTokens;
    // A render the direct path does not support goes to LlamaChat, which renders it once more.
    const directPrompt = directPlan
      ? prepareDirectPrompt({
          prompt,
          model: loaded.model,
          grammar,
          stops: planStopStrings(plan, request),
        })
      : undefined;
    return {
      promptTokens,
      maxCompletionTokens,
      run: (signal, runOptions) =>
        runLlamaGeneration({
          runOptions,
          pool,
          request,
          plan,
          history,
          grammar,
          directPrompt,
          prompt: prompt.tokens,
          promptTokens,
          maxCompletionTokens,
          signal,
          closeSignal: closeController.signal,
          logger: runLogger,
          modelId,
        }),
    };
  }

  async function disposeLoaded(loaded: LoadedLlamaModel): Promise<void> {
    try {
      for (const slot of loaded.slots) slot.chat.dispose({ disposeSequence: true });
      await loaded.context.dispose();
      await loaded.model.dispose();
    } catch (error) {
      logger.warn({ model: modelId, err: error }, "local model did not unload cleanly");
    }
  }
}
