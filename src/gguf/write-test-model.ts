import { fromByteLevel } from "./byte-level-bpe.ts";
import { countTensorElements, type GgufTensor } from "./gguf-tensor.ts";
import { type GgufMetadata, gguf } from "./gguf-value.ts";
import { writeGgufFile } from "./gguf-writer.ts";
import { testModelChatTemplate } from "./test-model-chat-template.ts";
import { getTestModelVocabulary, type TestModelVocabulary, tokenTypes } from "./test-model-vocabulary.ts";
import { createTestModelTensors, type TestModelBiases, type TestModelShape } from "./test-model-weights.ts";

/** Size presets: `tiny` for tests (about 1.5 M parameters), `small` for benchmarks (about 24 M). */
export type TestModelSize = "tiny" | "small";

export type TestModelArchitecture = "llama" | "qwen2";

export type WriteTestModelOptions = {
  /** Destination file; written atomically (temporary file in the same folder, then renamed). */
  readonly path: string;
  /** Seed of the random weights. Same options give a byte-identical file. Default 1. */
  readonly seed?: number;
  /** Default `"tiny"`. */
  readonly size?: TestModelSize;
  /**
   * Default `"llama"`. `"qwen2"` writes the same model under Qwen2's architecture name (its
   * keys, NEOX RoPE layout), for which node-llama-cpp's `resolveChatWrapper` picks
   * `QwenChatWrapper`; for `"llama"` it picks `JinjaTemplateChatWrapper` (the template is the
   * same and renders identically).
   */
  readonly architecture?: TestModelArchitecture;
  /**
   * Strength, in logit units (nats), of the bias towards `<|im_end|>` late in an answer; the
   * other biases (early suppression of the end, JSON closing tokens) scale with it. `0` writes
   * random logits with the control tokens (`<|im_end|>`, `<|endoftext|>`, `<|im_start|>`)
   * suppressed by {@link neverEndBias}: answers never end by themselves, only at a limit.
   * Default {@link defaultEndBias}.
   */
  readonly endBias?: number;
};

export type TestModelInfo = {
  readonly path: string;
  /** Total number of weights. */
  readonly parameters: number;
  readonly vocabularySize: number;
  /** Trained context length written to `<architecture>.context_length`. */
  readonly contextLength: number;
  /** File size in bytes. */
  readonly bytes: number;
};

export const defaultEndBias = 8;

/**
 * The logit bias (nats) on control tokens with `endBias: 0`. Plain random logits still sampled
 * `<|im_end|>` now and then at a temperature (about once in a few hundred tokens), which cut
 * the "endless" generations that tests of disconnects, crashes and shutdowns depend on.
 */
export const neverEndBias = -30;

/** `general.file_type` (llama_ftype) named after the type of most weights. */
const llamaFileTypes = { f32: 0, f16: 1, q8_0: 7 } as const;

const shapes: Record<TestModelSize, Omit<TestModelShape, "ropeLayout">> = {
  // Head dimension 128 and RoPE base 1e6 (as in Qwen2.5) give the end-of-answer circuit in
  // test-model-weights.ts enough RoPE frequencies.
  tiny: {
    embeddingLength: 256,
    blockCount: 2,
    headCount: 2,
    headCountKv: 1,
    feedForwardLength: 512,
    contextLength: 2048,
    ropeFreqBase: 1_000_000,
    blockMatrixType: "f32",
    vocabularyMatrixType: "f32",
  },
  small: {
    embeddingLength: 512,
    blockCount: 8,
    headCount: 4,
    headCountKv: 2,
    feedForwardLength: 1408,
    contextLength: 4096,
    ropeFreqBase: 1_000_000,
    // Q8_0 runs about twice as fast as f16 on CPU; the biased vocabulary matrices stay f16.
    blockMatrixType: "q8_0",
    vocabularyMatrixType: "f16",
  },
};

/**
 * Writes a small llama-architecture GGUF chat model with random weights, a real byte-level BPE
 * tokenizer, ChatML special tokens and a Qwen2.5-style chat template with tool calling.
 * Deterministic: the same options always produce the same bytes.
 *
 * Behaviour with the default `endBias` (measured with node-llama-cpp's `LlamaChat`): answers
 * end on `<|im_end|>` after about 8 to 15 tokens, at any temperature and however long the
 * conversation, so `maxTokens: 3` nearly always stops on the limit and `maxTokens: 200` never
 * does; under a JSON grammar the value closes within about 20 tokens. The text is meaningless.
 */
export async function writeTestModel(options: WriteTestModelOptions): Promise<TestModelInfo> {
  const content = createTestModelContent(options);
  const { bytes } = await writeGgufFile({
    path: options.path,
    metadata: content.metadata,
    tensors: content.tensors,
  });
  return {
    path: options.path,
    parameters: content.tensors.reduce((sum, tensor) => sum + countTensorElements(tensor.dimensions), 0),
    vocabularySize: content.vocabularySize,
    contextLength: content.contextLength,
    bytes,
  };
}

/** What {@link writeTestModel} writes, for callers that want to alter it (e.g. drop a key). */
export type TestModelContent = {
  readonly metadata: GgufMetadata;
  readonly tensors: readonly GgufTensor[];
  readonly vocabularySize: number;
  readonly contextLength: number;
};

/** Builds the metadata and (lazily generated) tensors of a test model without writing them. */
export function createTestModelContent(options: Omit<WriteTestModelOptions, "path">): TestModelContent {
  const seed = options.seed ?? 1;
  const size = options.size ?? "tiny";
  const endBias = options.endBias ?? defaultEndBias;
  if (!Number.isSafeInteger(seed)) throw new Error(`seed must be an integer, got ${seed}`);
  if (!Number.isFinite(endBias)) throw new Error(`endBias must be a finite number, got ${endBias}`);
  const architecture = options.architecture ?? "llama";
  const sizeShape = shapes[size];
  if (sizeShape === undefined) throw new Error(`unknown test model size: ${String(size)}`);
  if (architecture !== "llama" && architecture !== "qwen2") {
    throw new Error(`unknown test model architecture: ${String(architecture)}`);
  }
  const shape: TestModelShape = { ...sizeShape, ropeLayout: architecture === "llama" ? "normal" : "neox" };

  const vocabulary = getTestModelVocabulary();
  return {
    metadata: createMetadata({ shape, vocabulary, size, seed, architecture }),
    tensors: createTestModelTensors({ shape, biases: createBiases(vocabulary, endBias), seed }),
    vocabularySize: vocabulary.tokens.length,
    contextLength: shape.contextLength,
  };
}

type CreateMetadataOptions = {
  readonly shape: TestModelShape;
  readonly vocabulary: TestModelVocabulary;
  readonly size: TestModelSize;
  readonly seed: number;
  readonly architecture: TestModelArchitecture;
};

function createMetadata(options: CreateMetadataOptions): GgufMetadata {
  const { shape, vocabulary, architecture } = options;
  const headDimension = shape.embeddingLength / shape.headCount;
  return {
    "general.architecture": gguf.string(architecture),
    "general.type": gguf.string("model"),
    "general.name": gguf.string(`Tollgate Test ${options.size} (seed ${options.seed})`),
    "general.description": gguf.string("Random weights for tests and demos; its text has no meaning."),
    "general.file_type": gguf.u32(llamaFileTypes[shape.blockMatrixType]),
    "general.alignment": gguf.u32(32),
    [`${architecture}.context_length`]: gguf.u32(shape.contextLength),
    [`${architecture}.embedding_length`]: gguf.u32(shape.embeddingLength),
    [`${architecture}.block_count`]: gguf.u32(shape.blockCount),
    [`${architecture}.feed_forward_length`]: gguf.u32(shape.feedForwardLength),
    [`${architecture}.attention.head_count`]: gguf.u32(shape.headCount),
    [`${architecture}.attention.head_count_kv`]: gguf.u32(shape.headCountKv),
    [`${architecture}.rope.dimension_count`]: gguf.u32(headDimension),
    [`${architecture}.rope.freq_base`]: gguf.f32(shape.ropeFreqBase),
    [`${architecture}.attention.layer_norm_rms_epsilon`]: gguf.f32(1e-5),
    [`${architecture}.vocab_size`]: gguf.u32(vocabulary.tokens.length),
    "tokenizer.ggml.model": gguf.string("gpt2"),
    "tokenizer.ggml.pre": gguf.string("qwen2"),
    "tokenizer.ggml.tokens": gguf.strings(vocabulary.tokens),
    "tokenizer.ggml.token_type": gguf.numbers("i32", vocabulary.tokenTypes),
    "tokenizer.ggml.merges": gguf.strings(vocabulary.merges),
    "tokenizer.ggml.bos_token_id": gguf.u32(vocabulary.endOfTextId),
    "tokenizer.ggml.eos_token_id": gguf.u32(vocabulary.imEndId),
    "tokenizer.ggml.eot_token_id": gguf.u32(vocabulary.imEndId),
    "tokenizer.ggml.padding_token_id": gguf.u32(vocabulary.endOfTextId),
    "tokenizer.ggml.add_bos_token": gguf.bool(false),
    "tokenizer.chat_template": gguf.string(testModelChatTemplate),
  };
}

/**
 * Logit biases, as multiples of `endBias`; "late" applies once the answer is under way, "early"
 * right after `<|im_start|>assistant\n` (see test-model-weights.ts).
 * - `<|im_end|>`: strongly suppressed early, the most likely token late, so answers end after
 *   about 10 to 20 tokens, at temperature 0 too.
 * - `"`, then `}`, and more weakly other JSON closing pieces (`]`, `"}`, `}}` ...): under a JSON
 *   grammar `<|im_end|>` is not allowed, and these make strings, objects and arrays close. `"`
 *   must clearly beat `}`, which a string may also contain, or greedy decoding can loop on `}`
 *   inside a string. `,` is not a closer: it opens another member.
 * - Whitespace-only tokens, slightly: JSON allows runs of indentation between tokens.
 * - `<|endoftext|>` and `<|im_start|>`: never wanted in an answer.
 * - Bytes that are not printable ASCII: random bytes rarely form valid UTF-8.
 */
const biasFactors = {
  endLate: 1,
  endEarly: -2,
  otherControl: -2,
  quoteLate: 0.75,
  braceLate: 0.45,
  strongCloserEarly: -0.25,
  weakCloser: 0.3,
  whitespace: -0.25,
  nonAsciiByte: -0.5,
} as const;

const strongClosers = new Map([
  ['"', biasFactors.quoteLate],
  ["}", biasFactors.braceLate],
]);
const closerCharacters = new Set(['"', "}", "]"]);

function createBiases(vocabulary: TestModelVocabulary, endBias: number): TestModelBiases {
  const lateBias = new Map<number, number>();
  const earlyBias = new Map<number, number>();
  if (endBias === 0) {
    for (const id of [vocabulary.imEndId, vocabulary.endOfTextId, vocabulary.imStartId]) {
      lateBias.set(id, neverEndBias);
      earlyBias.set(id, neverEndBias);
    }
  } else {
    lateBias.set(vocabulary.imEndId, biasFactors.endLate * endBias);
    earlyBias.set(vocabulary.imEndId, biasFactors.endEarly * endBias);
    lateBias.set(vocabulary.endOfTextId, biasFactors.otherControl * endBias);
    lateBias.set(vocabulary.imStartId, biasFactors.otherControl * endBias);
    vocabulary.tokens.forEach((token, id) => {
      if (vocabulary.tokenTypes[id] !== tokenTypes.normal) return;
      const text = Buffer.from(fromByteLevel(token)).toString("latin1");
      const strongCloserLate = strongClosers.get(text);
      if (strongCloserLate !== undefined) {
        lateBias.set(id, strongCloserLate * endBias);
        earlyBias.set(id, biasFactors.strongCloserEarly * endBias);
      } else if (text.length <= 3 && [...text].every((character) => closerCharacters.has(character))) {
        lateBias.set(id, biasFactors.weakCloser * endBias);
      } else if (/^\s+$/.test(text)) {
        lateBias.set(id, biasFactors.whitespace * endBias);
      } else if ([...text].some((character) => !isPrintableAscii(character))) {
        lateBias.set(id, biasFactors.nonAsciiByte * endBias);
      }
    });
  }
  return {
    vocabularySize: vocabulary.tokens.length,
    lateBias,
    earlyBias,
    markerTokenId: vocabulary.imStartId,
  };
}

function isPrintableAscii(character: string): boolean {
  const code = character.charCodeAt(0);
  return (code >= 0x20 && code < 0x7f) || character === "\n" || character === "\t";
}
