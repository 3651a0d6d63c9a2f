import { getLlama, type Llama, LlamaLogLevel } from "node-llama-cpp";

/** GPU use of a llama.cpp binding: "auto" lets node-llama-cpp pick a backend, false forces the CPU. */
export type LlamaGpuSetting = "auto" | false;

const sharedLlamas = new Map<LlamaGpuSetting, Promise<Llama>>();

/**
 * The process-wide llama.cpp binding for a GPU setting, loaded once and shared by every local
 * model. Only prebuilt binaries are used (`build: "never"`): a server must never start compiling
 * llama.cpp or downloading anything because a model was requested. A failed load is not cached,
 * so a later call tries again.
 */
export function getSharedLlama(options: { gpu: LlamaGpuSetting }): Promise<Llama> {
  const existing = sharedLlamas.get(options.gpu);
  if (existing !== undefined) return existing;
  const loading = getLlama({
    gpu: options.gpu,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  });
  sharedLlamas.set(options.gpu, loading);
  loading.catch(() => {
    if (sharedLlamas.get(options.gpu) === loading) sharedLlamas.delete(options.gpu);
  });
  return loading;
}
