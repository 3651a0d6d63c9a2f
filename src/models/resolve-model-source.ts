import { join } from "node:path";
import { createModelFileName } from "./download/create-model-file-name.ts";
import { hasUriScheme, type ModelUri, parseModelUri } from "./download/parse-model-uri.ts";

/**
 * Where a llama model's GGUF comes from (`engine.model`): a local file, or a URI whose file is
 * downloaded into the models folder under a stable name (present there or not yet).
 */
export type ModelSource =
  | { type: "file"; path: string }
  | { type: "remote"; uri: ModelUri; path: string }
  | { type: "unsupported"; text: string };

/**
 * Resolves `engine.model` without touching the network or the disk: text with a URI scheme
 * (`hf:`, `https:`, `http:`) is a remote source, anything else a file path. A scheme that is not
 * supported, or a malformed `hf:` URI, is `unsupported` (the configuration loader refuses those
 * already; the CLI may meet them).
 */
export function resolveModelSource(model: string, options: { modelsFolder: string }): ModelSource {
  if (!hasUriScheme(model)) return { type: "file", path: model };
  const uri = parseModelUri(model);
  if (uri === undefined) return { type: "unsupported", text: model };
  return { type: "remote", uri, path: join(options.modelsFolder, createModelFileName(uri)) };
}
