import { open } from "node:fs/promises";

/** The four bytes every GGUF file starts with. */
const ggufMagic = "GGUF";

type MetadataRecord = { readonly [key: string]: unknown };

/**
 * Whether the file at `path` starts with the GGUF magic bytes: `false` for a file shorter than
 * them. Reads those 4 bytes only. Throws the file system's error when the file cannot be opened
 * (missing, a folder, not readable).
 */
export async function startsWithGgufMagic(path: string): Promise<boolean> {
  const handle = await open(path, "r");
  try {
    const start = Buffer.alloc(ggufMagic.length);
    const { bytesRead } = await handle.read(start, 0, start.length, 0);
    return bytesRead === start.length && start.toString("latin1") === ggufMagic;
  } finally {
    await handle.close();
  }
}

/**
 * Hyperparameters whose absence makes llama.cpp abort the whole process (SIGABRT from a failed
 * assertion) or fail in a way that is hard to explain, checked for dense llama-family
 * architectures. They must be positive integers (per-layer ones may be arrays).
 */
const requiredArchitectureKeys = [
  { key: "context_length", perLayer: false },
  { key: "embedding_length", perLayer: false },
  { key: "block_count", perLayer: false },
  { key: "feed_forward_length", perLayer: true },
  { key: "attention.head_count", perLayer: true },
] as const;

/** Architectures whose loader in llama.cpp needs every key above. */
const checkedArchitectures = new Set(["llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3"]);

/**
 * Checks a model file's header (no weights are read) and throws an `Error` naming the problem
 * when llama.cpp could not load it or would crash the process trying: not a GGUF file, a
 * llama-family model without its hyperparameters, or a model without a usable tokenizer.
 */
export async function checkModelFile(path: string): Promise<void> {
  await checkHeader(path);
  // node-llama-cpp's reader is imported only for a file that starts like a GGUF: a server whose
  // model file is missing or is something else does not load the library.
  const { readGgufFileInfo } = await import("node-llama-cpp");
  let metadata: MetadataRecord;
  try {
    const info = await readGgufFileInfo(path, {
      sourceType: "filesystem",
      readTensorInfo: false,
      logWarnings: false,
    });
    metadata = info.metadata as unknown as MetadataRecord;
  } catch (error) {
    throw new Error(`${path}: cannot read the GGUF header: ${errorMessage(error)}`, { cause: error });
  }

  const architecture = readPath(metadata, "general.architecture");
  if (typeof architecture !== "string" || architecture === "") {
    throw new Error(`${path}: GGUF metadata key general.architecture is missing`);
  }
  if (checkedArchitectures.has(architecture)) checkHyperparameters(path, metadata, architecture);
  checkTokenizer(path, metadata);
}

function checkHyperparameters(path: string, metadata: MetadataRecord, architecture: string): void {
  for (const { key, perLayer } of requiredArchitectureKeys) {
    const fullKey = `${architecture}.${key}`;
    const value = readPath(metadata, fullKey);
    if (value === undefined) throw new Error(`${path}: GGUF metadata key ${fullKey} is missing`);
    // Per-layer arrays may hold 0 for layers without that part, but not only zeros.
    const valid =
      perLayer && Array.isArray(value)
        ? value.every((item) => item === 0 || isPositiveInteger(item)) && value.some(isPositiveInteger)
        : isPositiveInteger(value);
    if (!valid) {
      throw new Error(
        `${path}: GGUF metadata key ${fullKey} must be a positive integer, got ${describe(value)}`,
      );
    }
  }
}

function checkTokenizer(path: string, metadata: MetadataRecord): void {
  const model = readPath(metadata, "tokenizer.ggml.model");
  if (model === undefined) throw new Error(`${path}: GGUF metadata key tokenizer.ggml.model is missing`);
  if (typeof model !== "string") {
    throw new Error(
      `${path}: GGUF metadata key tokenizer.ggml.model must be a string, got ${describe(model)}`,
    );
  }
  if (model === "none") return;
  const tokens = readPath(metadata, "tokenizer.ggml.tokens");
  if (tokens === undefined) throw new Error(`${path}: GGUF metadata key tokenizer.ggml.tokens is missing`);
  if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every((token) => typeof token === "string")) {
    throw new Error(`${path}: GGUF metadata key tokenizer.ggml.tokens must be a non-empty array of strings`);
  }
  const tokenTypes = readPath(metadata, "tokenizer.ggml.token_type");
  if (tokenTypes === undefined) {
    throw new Error(`${path}: GGUF metadata key tokenizer.ggml.token_type is missing`);
  }
  if (!Array.isArray(tokenTypes) || !tokenTypes.every((type) => Number.isInteger(type))) {
    throw new Error(`${path}: GGUF metadata key tokenizer.ggml.token_type must be an array of integers`);
  }
  if (tokenTypes.length < tokens.length) {
    throw new Error(
      `${path}: GGUF metadata key tokenizer.ggml.token_type has ${tokenTypes.length} entries for ${tokens.length} tokens`,
    );
  }
  if (model === "gpt2" && readPath(metadata, "tokenizer.ggml.merges") === undefined) {
    throw new Error(
      `${path}: GGUF metadata key tokenizer.ggml.merges is missing (required by the gpt2 tokenizer)`,
    );
  }
}

/** Magic, version, tensor count and key/value count. */
const ggufHeaderBytes = 24;

/**
 * The fewest bytes one tensor's description can take in a GGUF header: its name's length (u64),
 * its dimension count (u32), type (u32) and offset (u64), even with an empty name and no dimension.
 */
const minTensorInfoBytes = 24n;
/** The fewest bytes one metadata entry can take: its key's length (u64), type (u32), a byte of value. */
const minMetadataEntryBytes = 13n;

export async function checkHeader(path: string): Promise<void> {
  let bytesRead: number;
  let fileBytes: number;
  const header = Buffer.alloc(ggufHeaderBytes);
  try {
    const handle = await open(path, "r");
    try {
      ({ bytesRead } = await handle.read(header, 0, header.length, 0));
      fileBytes = (await handle.stat()).size;
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw new Error(`${path}: cannot open the model file: ${errorMessage(error)}`, { cause: error });
  }
  if (bytesRead < ggufMagic.length || header.toString("latin1", 0, ggufMagic.length) !== ggufMagic) {
    throw new Error(`${path}: not a GGUF file (it does not start with the GGUF magic bytes)`);
  }
  if (bytesRead < ggufHeaderBytes) {
    throw new Error(
      `${path}: the file is too short to be a GGUF file (${bytesRead} bytes); is it truncated?`,
    );
  }
  const version = header.readUInt32LE(4);
  if (version !== 2 && version !== 3) {
    throw new Error(`${path}: unsupported GGUF version ${version} (llama.cpp reads versions 2 and 3)`);
  }
  // A damaged count (4 billion tensors) would have the reader build that many entries on the
  // event loop, for minutes and gigabytes, before it fails: no file this size can hold them.
  const tensors = header.readBigUInt64LE(8);
  const entries = header.readBigUInt64LE(16);
  if (
    BigInt(ggufHeaderBytes) + tensors * minTensorInfoBytes + entries * minMetadataEntryBytes >
    BigInt(fileBytes)
  ) {
    throw new Error(
      `${path}: the GGUF header counts ${tensors} tensors and ${entries} metadata entries, more than a file of ${fileBytes} bytes can hold; the file is damaged or truncated: download it again`,
    );
  }
}

/**
 * Reads a dotted key from node-llama-cpp's nested metadata. Keys are nested on dots, except
 * where a key is both a value and a prefix; try the flat spelling of every remaining suffix.
 */
function readPath(metadata: MetadataRecord, key: string): unknown {
  const parts = key.split(".");
  let current: unknown = metadata;
  for (let index = 0; index < parts.length; index++) {
    if (typeof current !== "object" || current === null || Array.isArray(current)) return undefined;
    const record = current as MetadataRecord;
    const rest = parts.slice(index).join(".");
    if (index < parts.length - 1 && Object.hasOwn(record, rest)) return record[rest];
    current = record[parts[index]!];
  }
  return current;
}

function isPositiveInteger(value: unknown): boolean {
  return (
    (typeof value === "number" && Number.isInteger(value) && value > 0) ||
    (typeof value === "bigint" && value > 0n)
  );
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === "string") return JSON.stringify(value);
  return String(value);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
