import type { GgufTensor, GgufTensorType } from "./gguf-tensor.ts";
import { createSeededRandom } from "./seeded-random.ts";

/**
 * Weights of the random test models, with a small hand-built circuit that makes generations end.
 *
 * Random weights almost never pick `<|im_end|>`, so three residual-stream dimensions are
 * reserved and written only by the constructions below (random matrices neither read nor write
 * them):
 * - `anchor` (0): every token embedding holds the constant `K` here. After the final RMS norm it
 *   is a near-constant, so `output.weight[t][anchor]` acts as a per-token logit bias.
 * - `marker` (1): non-zero only in the embedding of `<|im_start|>`.
 * - `signal` (2): written by head 0 of layer 0, the marker head. Its query is constant (read
 *   from the anchor) and its key is the marker, spread over several RoPE pairs plus one
 *   practically unrotated pair, so its score for an `<|im_start|>` that is `d` tokens back is
 *   `peak·r(d) − offset` (see `markerPeakScore`); every other token scores 0. Its value is the
 *   marker, so its output is the attention weight `w` on the last `<|im_start|>`: about 1 right
 *   after `<|im_start|>assistant\n`, falling to about 0 some 10 tokens later, whatever the
 *   prompt length and however many earlier turns there are. `output.weight[t][signal]` turns
 *   `w` into a logit bias that suppresses the end early in an answer and releases it later.
 * All biases scale with `endBias`; `endBias: 0` only suppresses the control tokens.
 */
export type TestModelShape = {
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  readonly ropeFreqBase: number;
  /** Element type of the matrices inside the blocks (norm weights are always f32). */
  readonly blockMatrixType: GgufTensorType;
  /** Element type of `token_embd` and `output`, which carry the hand-set biases. */
  readonly vocabularyMatrixType: GgufTensorType;
  /**
   * How llama.cpp pairs a head's dimensions for RoPE: `normal` (llama: 2k and 2k+1) or `neox`
   * (qwen2: k and k + dh/2).
   */
  readonly ropeLayout: "normal" | "neox";
};

export type TestModelBiases = {
  readonly vocabularySize: number;
  /** Logit bias (nats) per token id when the `signal` has decayed (late in an answer). */
  readonly lateBias: ReadonlyMap<number, number>;
  /** Extra logit bias per token id right after `<|im_start|>` (scaled down as the signal decays). */
  readonly earlyBias: ReadonlyMap<number, number>;
  /** Token id of `<|im_start|>` (carries the marker). */
  readonly markerTokenId: number;
};

const anchorDimension = 0;
const markerDimension = 1;
const signalDimension = 2;
const reservedDimensions = 3;

/** The anchor is this many times the RMS of the ordinary dimensions. */
const anchorRatio = 6;
/**
 * Marker head score for an `<|im_start|>` at distance `d`: `peak·r(d) − offset`, where `r` is
 * the mean of `cos(θ·d)` over the RoPE pairs with θ in the band. `r` falls from 1 to about 0.5
 * within 20 tokens and stays below ~0.5 over the whole context (no recurrence), so older turns'
 * `<|im_start|>` tokens are ignored: score ≥ 12 right after the last one, ≤ −3 for old ones.
 */
const markerPeakScore = 30;
const markerOffset = 18;
const markerBand = { lowest: 0.016, highest: 0.12 } as const;
/** Random logit standard deviation. */
const logitDeviation = 1;
/** The residual `signal` value at full attention, in units of the ordinary dimensions' RMS. */
const signalScale = 2;

export type CreateTestModelTensorsOptions = {
  readonly shape: TestModelShape;
  readonly biases: TestModelBiases;
  readonly seed: number;
};

/** Creates all tensors of a llama-architecture model (token_embd, output_norm, output, blk.N.*). */
export function createTestModelTensors(options: CreateTestModelTensorsOptions): GgufTensor[] {
  const { shape, biases, seed } = options;
  const n = shape.embeddingLength;
  const headDimension = n / shape.headCount;
  const qDimension = shape.headCount * headDimension;
  const kvDimension = shape.headCountKv * headDimension;
  const headsPerKvHead = shape.headCount / shape.headCountKv;
  const vocabularySize = biases.vocabularySize;
  const isReserved = (dimension: number): boolean => dimension < reservedDimensions;

  // Expected RMS of the residual of an ordinary token and of the marker token (both including
  // the anchor), with ordinary dimensions of unit variance.
  const anchor = anchorRatio * Math.sqrt(n);
  const ordinaryRms = Math.sqrt(anchorRatio ** 2 + 1);
  const markerRms = Math.sqrt(2 * anchorRatio ** 2 + 1);
  const normalizedAnchor = anchor / ordinaryRms;
  const normalizedMarker = anchor / markerRms;
  // Norm weights restore unit scale on ordinary dimensions despite the large anchor.
  const ordinaryGain = ordinaryRms;

  const rope = chooseMarkerRopePairs({ headDimension, shape });
  // Per band pair: q·k = markerPeakScore·√dh / bandPairs at distance 0; static pair: −markerOffset·√dh.
  const bandWeight = Math.sqrt(
    (markerPeakScore * Math.sqrt(headDimension)) /
      rope.bandPairs.length /
      (normalizedAnchor * normalizedMarker),
  );
  const staticWeight = Math.sqrt(
    (markerOffset * Math.sqrt(headDimension)) / (normalizedAnchor * normalizedMarker),
  );
  const queryWeights = new Map<number, number>([
    ...rope.bandPairs.map((pair): [number, number] => [rope.firstDimension(pair), bandWeight]),
    [rope.firstDimension(rope.staticPair), -staticWeight],
  ]);
  const keyWeights = new Map<number, number>([
    ...rope.bandPairs.map((pair): [number, number] => [rope.firstDimension(pair), bandWeight]),
    [rope.firstDimension(rope.staticPair), staticWeight],
  ]);
  const signalValue = signalScale * ordinaryRms;
  const outputWeight = signalValue / normalizedMarker;
  // Residual growth of ordinary dimensions through the layers, for the final normalization.
  // Each block's two sublayers are scaled (GPT-2 style, by 1/√(2·blocks)) so that together they
  // add about one unit of variance to the ordinary dimensions, whatever the depth.
  const depthScale = 1 / Math.sqrt(2 * shape.blockCount);
  const finalVariance = 2;
  const finalRms = Math.sqrt(anchorRatio ** 2 + finalVariance);
  const finalNormalizedAnchor = anchor / finalRms;
  const finalNormalizedSignal = signalValue / finalRms;

  const matrix = (name: string, inputs: number, outputs: number, deviation: number, rules: MatrixRules) => {
    const type = name.startsWith("blk.") ? shape.blockMatrixType : shape.vocabularyMatrixType;
    return createMatrixTensor({ name, inputs, outputs, type, seed, deviation, rules });
  };
  const normVector = (name: string): GgufTensor =>
    createVectorTensor(name, n, (dimension) => (isReserved(dimension) ? 1 : ordinaryGain));
  const reservedInputs = [anchorDimension, markerDimension, signalDimension];
  const isReservedRow = (output: number): boolean => isReserved(output);

  const tensors: GgufTensor[] = [
    matrix("token_embd.weight", n, vocabularySize, 1, {
      zeroInputs: reservedInputs,
      fixedEntries: (token) =>
        token === biases.markerTokenId
          ? [
              [anchorDimension, anchor],
              [markerDimension, anchor],
            ]
          : [[anchorDimension, anchor]],
    }),
  ];

  const inputDeviation = 1 / Math.sqrt(n - reservedDimensions);
  for (let layer = 0; layer < shape.blockCount; layer++) {
    const prefix = `blk.${layer}`;
    const isMarkerLayer = layer === 0;
    tensors.push(normVector(`${prefix}.attn_norm.weight`));
    tensors.push(
      matrix(
        `${prefix}.attn_q.weight`,
        n,
        qDimension,
        inputDeviation,
        isMarkerLayer
          ? {
              zeroInputs: reservedInputs,
              // Head 0 is the marker head; the heads sharing its key must not look at the marker.
              isZeroRow: (row) => {
                const head = Math.floor(row / headDimension);
                return head === 0 || (head < headsPerKvHead && rope.usedDimensions.has(row % headDimension));
              },
              fixedEntries: (row) => {
                const weight = row < headDimension ? queryWeights.get(row) : undefined;
                return weight === undefined ? [] : [[anchorDimension, weight]];
              },
            }
          : { zeroInputs: reservedInputs },
      ),
    );
    tensors.push(
      matrix(
        `${prefix}.attn_k.weight`,
        n,
        kvDimension,
        inputDeviation,
        isMarkerLayer
          ? {
              zeroInputs: reservedInputs,
              isZeroRow: (row) => rope.usedDimensions.has(row),
              fixedEntries: (row) => {
                const weight = keyWeights.get(row);
                return weight === undefined ? [] : [[markerDimension, weight]];
              },
            }
          : { zeroInputs: reservedInputs },
      ),
    );
    tensors.push(
      matrix(
        `${prefix}.attn_v.weight`,
        n,
        kvDimension,
        inputDeviation,
        isMarkerLayer
          ? {
              zeroInputs: reservedInputs,
              isZeroRow: (row) => row === 0,
              fixedEntries: (row) => (row === 0 ? [[markerDimension, 1]] : []),
            }
          : { zeroInputs: reservedInputs },
      ),
    );
    // Layer 0: head 0 writes only the signal; the heads sharing its value channel 0 (the
    // marker) must not copy it anywhere.
    const markerHeadInputs = Array.from({ length: headDimension }, (_, within) => within).concat(
      Array.from({ length: headsPerKvHead - 1 }, (_, head) => (head + 1) * headDimension),
    );
    tensors.push(
      matrix(`${prefix}.attn_output.weight`, qDimension, n, depthScale / Math.sqrt(qDimension), {
        zeroInputs: isMarkerLayer ? markerHeadInputs : [],
        isZeroRow: isReservedRow,
        fixedEntries: (output) => (isMarkerLayer && output === signalDimension ? [[0, outputWeight]] : []),
      }),
    );
    tensors.push(normVector(`${prefix}.ffn_norm.weight`));
    tensors.push(
      matrix(`${prefix}.ffn_gate.weight`, n, shape.feedForwardLength, inputDeviation, {
        zeroInputs: reservedInputs,
      }),
    );
    tensors.push(
      matrix(`${prefix}.ffn_up.weight`, n, shape.feedForwardLength, inputDeviation, {
        zeroInputs: reservedInputs,
      }),
    );
    tensors.push(
      matrix(
        `${prefix}.ffn_down.weight`,
        shape.feedForwardLength,
        n,
        // silu(gate)·up has a variance of about 0.35 for unit inputs.
        depthScale / Math.sqrt(0.35 * shape.feedForwardLength),
        { isZeroRow: isReservedRow },
      ),
    );
  }

  tensors.push(normVector("output_norm.weight"));
  const finalOrdinaryScale = (Math.sqrt(finalVariance) * ordinaryGain) / finalRms;
  const outputDeviation = logitDeviation / (Math.sqrt(n - reservedDimensions) * finalOrdinaryScale);
  tensors.push(
    matrix("output.weight", n, vocabularySize, outputDeviation, {
      zeroInputs: reservedInputs,
      fixedEntries: (token) => [
        [anchorDimension, (biases.lateBias.get(token) ?? 0) / finalNormalizedAnchor],
        [signalDimension, (biases.earlyBias.get(token) ?? 0) / finalNormalizedSignal],
      ],
    }),
  );
  return tensors;
}

type MarkerRopePairs = {
  /** Pair indices (dimensions 2k, 2k+1 of a head) whose frequency lies in the band. */
  readonly bandPairs: readonly number[];
  /** The slowest pair, which must stay (almost) unrotated over the context: a constant score. */
  readonly staticPair: number;
  readonly usedDimensions: ReadonlySet<number>;
  /** The dimension (within a head) of a pair's first component, which the circuit uses. */
  readonly firstDimension: (pair: number) => number;
};

/** RoPE rotates pair k of a head by `position·base^(−2k/dh)`. */
function chooseMarkerRopePairs(options: { headDimension: number; shape: TestModelShape }): MarkerRopePairs {
  const { headDimension, shape } = options;
  const pairCount = headDimension / 2;
  const frequency = (pair: number): number => shape.ropeFreqBase ** ((-2 * pair) / headDimension);
  const bandPairs: number[] = [];
  for (let pair = 0; pair < pairCount; pair++) {
    if (frequency(pair) >= markerBand.lowest && frequency(pair) <= markerBand.highest) bandPairs.push(pair);
  }
  const staticPair = pairCount - 1;
  if (bandPairs.length < 8 || frequency(staticPair) * shape.contextLength > 0.05) {
    throw new Error(
      `head dimension ${headDimension} with RoPE base ${shape.ropeFreqBase} cannot hold the end-of-answer circuit`,
    );
  }
  const firstDimension = (pair: number): number => (shape.ropeLayout === "normal" ? 2 * pair : pair);
  const secondDimension = (pair: number): number =>
    shape.ropeLayout === "normal" ? 2 * pair + 1 : pair + pairCount;
  const usedDimensions = new Set<number>();
  for (const pair of [...bandPairs, staticPair]) {
    usedDimensions.add(firstDimension(pair));
    usedDimensions.add(secondDimension(pair));
  }
  return { bandPairs, staticPair, usedDimensions, firstDimension };
}

/** Deterministic parts of a random matrix; rows are outputs, columns inputs. */
type MatrixRules = {
  /** Inputs (columns) that are 0 in every row. */
  readonly zeroInputs?: readonly number[];
  /** Rows that are 0 apart from their fixed entries. */
  readonly isZeroRow?: (output: number) => boolean;
  /** `[input, value]` entries of a row that have a set value. */
  readonly fixedEntries?: (output: number) => readonly (readonly [number, number])[];
};

type CreateMatrixTensorOptions = {
  readonly name: string;
  readonly inputs: number;
  readonly outputs: number;
  readonly type: GgufTensorType;
  readonly seed: number;
  /** Standard deviation of the uniform random entries. */
  readonly deviation: number;
  readonly rules: MatrixRules;
};

/** A `[inputs, outputs]` matrix (ggml order) of seeded uniform noise with some set entries. */
function createMatrixTensor(options: CreateMatrixTensorOptions): GgufTensor {
  const random = createSeededRandom(options.seed, options.name);
  const halfWidth = options.deviation * Math.sqrt(3);
  const { inputs, rules } = options;
  const zeroInput = new Uint8Array(inputs);
  for (const input of rules.zeroInputs ?? []) zeroInput[input] = 1;
  return {
    name: options.name,
    dimensions: [inputs, options.outputs],
    type: options.type,
    fill(target, offset) {
      let index = 0;
      while (index < target.length) {
        const output = Math.floor((offset + index) / inputs);
        const firstInput = offset + index - output * inputs;
        const endInput = Math.min(inputs, firstInput + target.length - index);
        const zeroRow = rules.isZeroRow?.(output) ?? false;
        const rowBase = index - firstInput;
        for (let input = firstInput; input < endInput; input++) {
          // Always draw, so set entries never shift the random stream.
          const value = (random.next() * 2 - 1) * halfWidth;
          target[rowBase + input] = zeroRow || zeroInput[input] === 1 ? 0 : value;
        }
        for (const [input, value] of rules.fixedEntries?.(output) ?? []) {
          if (input >= firstInput && input < endInput) target[rowBase + input] = value;
        }
        index += endInput - firstInput;
      }
    },
  };
}

function createVectorTensor(name: string, length: number, value: (index: number) => number): GgufTensor {
  return {
    name,
    dimensions: [length],
    type: "f32",
    fill(target, offset) {
      for (let index = 0; index < target.length; index++) target[index] = value(offset + index);
    },
  };
}
