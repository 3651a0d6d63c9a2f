import { getLlama, type Llama, LlamaLogLevel } from "node-llama-cpp";
import type { LlamaEngineLogger } from "./llama-engine-logger.ts";

/** GPU use of a llama.cpp binding: "auto" lets node-llama-cpp pick a backend, false forces the CPU. */
export type LlamaGpuSetting = "auto" | false;

const sharedLlamas = new Map<LlamaGpuSetting, Promise<Llama>>();

/**
 * Where llama.cpp's own messages go: the logger of the engine that asked last with one (a
 * server's engines share the server's); stderr, as node-llama-cpp writes them, until one does.
 */
let llamaCppLogger: LlamaEngineLogger | undefined;

/**
 * llama.cpp's message, as a JSON log line: its errors say why a model did not load (a tensor
 * beyond the file's end), which went to stderr as plain text beside the log's one-line summary.
 * Its errors about a grammar are warnings: grammars come from clients' schemas, whose request
 * is refused with 400 for them, so any key could otherwise write error lines at will.
 */
function logLlamaCppMessage(level: LlamaLogLevel, message: string): void {
  const text = message.trim();
  if (text === "") return;
  if (llamaCppLogger === undefined) {
    process.stderr.write(`[node-llama-cpp] ${text}\n`);
    return;
  }
  if (level === LlamaLogLevel.error && /grammar/i.test(text)) {
    llamaCppLogger.warn({ source: "llama.cpp" }, text);
  } else if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) {
    llamaCppLogger.error({ source: "llama.cpp" }, text);
  } else if (level === LlamaLogLevel.warn) {
    llamaCppLogger.warn({ source: "llama.cpp" }, text);
  }
}

/**
 * The process-wide llama.cpp binding for a GPU setting, loaded once and shared by every local
 * model. Only prebuilt binaries are used (`build: "never"`): a server must never start compiling
 * llama.cpp or downloading anything because a model was requested. A failed load is not cached,
 * so a later call tries again. llama.cpp's errors go to `logger` (see {@link logLlamaCppMessage}).
 */
export function getSharedLlama(options: {
  gpu: LlamaGpuSetting;
  logger?: LlamaEngineLogger;
}): Promise<Llama> {
  if (options.logger !== undefined) llamaCppLogger = options.logger;
  const existing = sharedLlamas.get(options.gpu);
  if (existing !== undefined) return existing;
  const loading = getLlama({
    gpu: options.gpu,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    logger: logLlamaCppMessage,
  });
  sharedLlamas.set(options.gpu, loading);
  loading.catch(() => {
    if (sharedLlamas.get(options.gpu) === loading) sharedLlamas.delete(options.gpu);
  });
  return loading;
}
