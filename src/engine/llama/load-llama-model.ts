import type { Stats } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type {
  ChatWrapper,
  Llama,
  LlamaChat,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
} from "node-llama-cpp";
import { quoteForShell } from "../../admin/quote-for-shell.ts";
import type { LlamaEngineConfig } from "../../catalog/catalog.ts";
import { checkModelFile, startsWithGgufMagic } from "../../gguf/check-model-file.ts";
import { ensureModelFile } from "../../models/download/ensure-model-file.ts";
import { ModelDownloadError } from "../../models/download/model-download-error.ts";
import type { LlamaEngineLogger } from "./llama-engine-logger.ts";
import { patchGrammarTerminals } from "./patch-grammar-terminals.ts";
import { type FileIdentity, readFileIdentity } from "./read-file-identity.ts";
import { resolveContextLength } from "./resolve-context-length.ts";
import { resolveThreadCount } from "./resolve-thread-count.ts";

/** One context sequence with the LlamaChat that generates on it; lent to one request at a time. */
export interface GenerationSlot {
  sequence: LlamaContextSequence;
  chat: LlamaChat;
}

/** A model ready to serve: one context with one slot per parallel request. */
export interface LoadedLlamaModel {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  /** Resolved once per model: resolving a Jinja template blocks the event loop for about a second. */
  chatWrapper: ChatWrapper;
  /** Tokens each sequence holds: prompt plus completion. */
  contextLength: number;
  threads: number;
  slots: GenerationSlot[];
}

/** A model that cannot be loaded, with a message for the client that says how to fix it. */
export class ModelLoadError extends Error {
  override readonly name = "ModelLoadError";
}

/** Prompt tokens evaluated per batch: llama.cpp's usual size, never above the context. */
const maxBatchSize = 512;

/**
 * Loads a GGUF chat model: downloads it first when `engine.model` is a URI whose file is not yet
 * in the models folder (the engine stays `loading` meanwhile), checks the file (a broken file
 * must not abort the process inside llama.cpp), loads the weights, creates one context whose
 * `parallel` sequences each hold the full context length, and resolves the chat wrapper from the
 * file's template.
 */
export async function loadLlamaModel(options: {
  config: LlamaEngineConfig;
  configuredContextLength: number | undefined;
  getLlama: () => Promise<Llama>;
  signal: AbortSignal;
  /** Download progress (a terminal on stderr gets a progress bar instead). Default: nowhere. */
  logger?: LlamaEngineLogger;
  /** For `TOLLGATE_MODELS_DIR`, `TOLLGATE_HF_ENDPOINT`, `HF_TOKEN`. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * Called once the file to load is there (downloaded, for a URI), before it is checked and
   * loaded: its path and identity, which a reload compares with the file's then (a file replaced
   * since is loaded again). Taken before loading, so a file replaced during the load is never
   * taken for the one loaded.
   */
  onFile?: (file: { path: string; identity: FileIdentity }) => void;
}): Promise<LoadedLlamaModel> {
  const path = await resolveModelFile(options);
  const identity = readFileIdentity(path);
  if (identity !== undefined) options.onFile?.({ path, identity });
  await checkFile(path);
  // Imported only now that the file is there and sound: node-llama-cpp and its dependencies take
  // tens of MB, which a model whose file is missing or broken should not cost.
  const llamaCpp = await import("node-llama-cpp");
  await patchGrammarTerminals();
  const llama = await options.getLlama();
  const model = await llama.loadModel({ modelPath: path, loadSignal: options.signal });
  try {
    const contextLength = resolveContextLength({
      configured: options.configuredContextLength,
      trained: model.trainContextSize,
    });
    const threads = resolveThreadCount({ configured: options.config.threads, llama });
    const parallel = Math.max(1, options.config.parallel);
    // node-llama-cpp's `contextSize` is per sequence: the context allocates `contextSize × sequences`
    // cells and llama.cpp gives each sequence its own share, so every request gets the full length.
    // One cell more than the length: LlamaChat wants a free cell beyond the prompt before it
    // generates (its `minFreeContextTokens` of 1) and otherwise shifts the context, which fails
    // for a prompt one token short of the length that the engine accepts (check-context-length.ts).
    const context = await model.createContext({
      sequences: parallel,
      contextSize: contextLength + 1,
      batchSize: Math.min(maxBatchSize, contextLength),
      threads,
      createSignal: options.signal,
    });
    const chatWrapper = llamaCpp.resolveChatWrapper(model);
    const slots = Array.from({ length: parallel }, () => {
      const sequence = context.getSequence();
      return { sequence, chat: new llamaCpp.LlamaChat({ contextSequence: sequence, chatWrapper }) };
    });
    return { llama, model, context, chatWrapper, contextLength, threads, slots };
  } catch (error) {
    await model.dispose();
    throw error;
  }
}

/** The file to load: `engine.model`, downloaded first when it is a URI (see ensure-model-file.ts). */
async function resolveModelFile(options: {
  config: LlamaEngineConfig;
  signal: AbortSignal;
  logger?: LlamaEngineLogger;
  env?: NodeJS.ProcessEnv;
}): Promise<string> {
  try {
    return await ensureModelFile({
      model: options.config.model,
      signal: options.signal,
      logger: options.logger,
      env: options.env,
    });
  } catch (error) {
    if (error instanceof ModelDownloadError) throw new ModelLoadError(error.message, { cause: error });
    throw error;
  }
}

/**
 * What an operator can do instead of mending the file: name another one, or a URI. Each message
 * below goes to the server log (the warning `local model unavailable`; API clients get it in
 * general terms, see describe-load-failure.ts): it names the configured path (resolved against
 * the config file's folder), and nothing else about the machine (no folder listing, no other file).
 */
const modelUri =
  "a model URI such as hf:ORG/REPO:QUANT (downloaded when the server loads it, or ahead of time with `tollgate models pull URI`)";
const otherModel = `set engine.model to another GGUF file or to ${modelUri}`;
const reload = "then reload the server (SIGHUP) or restart it.";

async function checkFile(path: string): Promise<void> {
  let found: Stats;
  try {
    found = await stat(path);
  } catch (error) {
    const code = error instanceof Error && "code" in error ? error.code : undefined;
    if (code === "ENOENT" || code === "ENOTDIR") {
      // make-test is for trying Tollgate out: offered for a missing file only, where it destroys
      // nothing, and not as the fix for a real model.
      throw new ModelLoadError(
        `The model file '${path}' does not exist. To fix it, put a GGUF chat model there, or ${otherModel}; ${reload} (To try Tollgate without a real model, \`tollgate models make-test ${quoteForShell(path)}\` writes a tiny random-weight test model there.)`,
      );
    }
    throw new ModelLoadError(
      `The model file '${path}' cannot be read (${typeof code === "string" ? code : "unknown error"}). To fix it, let the server's user read it and open the folders above it, or ${otherModel}; ${reload}`,
      { cause: error },
    );
  }
  if (found.isDirectory()) {
    throw new ModelLoadError(
      `The model file '${path}' is a folder, not a GGUF file. To fix it, set engine.model to the .gguf file in that folder (such as '${join(path, "model.gguf")}') or to a model URI such as hf:ORG/REPO:QUANT; ${reload}`,
    );
  }
  // A FIFO or a device would block or never end the read of the header.
  if (!found.isFile()) {
    throw new ModelLoadError(
      `The model file '${path}' is not a regular file. To fix it, ${otherModel}; ${reload}`,
    );
  }
  try {
    await checkModelFile(path);
  } catch (error) {
    // The checker's messages start with the path, named here already, and may end without a stop.
    const reason = (error instanceof Error ? error.message : String(error))
      .replace(`${path}: `, "")
      .replace(/(?<![.!?])$/, ".");
    const isGguf = await startsWithGgufMagic(path).catch(() => undefined);
    const fix =
      isGguf === false
        ? `Tollgate loads GGUF models only. To fix it, set engine.model to a GGUF file (llama.cpp's convert_hf_to_gguf.py converts a Hugging Face checkpoint such as .safetensors; many models are published as GGUF) or to ${modelUri}; ${reload}`
        : `Replace it with a valid GGUF chat model, or ${otherModel}; ${reload}`;
    throw new ModelLoadError(`The model file '${path}' cannot be loaded: ${reason} ${fix}`, { cause: error });
  }
}
