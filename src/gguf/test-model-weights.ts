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
 * - `signal` (2): written by head 0 of layer 0. That head's query is constant and its key is
 *   the marker, placed in one RoPE pair, so its score for an `<|im_start|>` that is `d` tokens
 *   back is `A·cos(θ·d)`; its value is the marker. The head's output, the attention weight `w`
 *   on recent `<|im_start|>` tokens, is about 1 right after `<|im_start|>assistant\n` and falls
 *   towards 0 a few tokens later. `output.weight[t][signal]` then turns `w` into a logit bias
 *   that suppresses the end early in an answer and releases it later.
 * All biases scale with `endBias`; `endBias: 0` leaves plain random logits.
 */
export type TestModelShape = {
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  readonly ropeFreqBase: number;
  /** Element type of the matrices (norm weights are always f32). */
  readonly matrixType: GgufTensorType;
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

  const rope = chooseMarkerRopePairs(headDimension, shape.ropeFreqBase, shape.contextLength);
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
    ...rope.bandPairs.map((pair): [number, number] => [2 * pair, bandWeight]),
    [2 * rope.staticPair, -staticWeight],
  ]);
  const keyWeights = new Map<number, number>([
    ...rope.bandPairs.map((pair): [number, number] => [2 * pair, bandWeight]),
    [2 * rope.staticPair, staticWeight],
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

  const matrix = (
    name: string,
    inputs: number,
    outputs: number,
    deviation: number,
    override?: (output: number, input: number) => number | undefined,
  ): GgufTensor =>
    createMatrixTensor({ name, inputs, outputs, type: shape.matrixType, seed, deviation, override });

  const normVector = (name: string): GgufTensor =>
    createVectorTensor(name, n, (dimension) => (isReserved(dimension) ? 1 : ordinaryGain));

  const tensors: GgufTensor[] = [
    matrix("token_embd.weight", n, vocabularySize, 1, (token, dimension) => {
      if (dimension === anchorDimension) return anchor;
      if (dimension === markerDimension) return token === biases.markerTokenId ? anchor : 0;
      if (dimension === signalDimension) return 0;
      return undefined;
    }),
  ];

  for (let layer = 0; layer < shape.blockCount; layer++) {
    const prefix = `blk.${layer}`;
    const isMarkerLayer = layer === 0;
    const inputDeviation = 1 / Math.sqrt(n - reservedDimensions);
    tensors.push(normVector(`${prefix}.attn_norm.weight`));
    tensors.push(
      matrix(`${prefix}.attn_q.weight`, n, qDimension, inputDeviation, (row, input) => {
        const head = Math.floor(row / headDimension);
        const within = row % headDimension;
        if (isMarkerLayer && head === 0)
          return input === anchorDimension ? (queryWeights.get(within) ?? 0) : 0;
        // Heads sharing the marker's key must not look at it.
        if (isMarkerLayer && head < headsPerKvHead && rope.usedDimensions.has(within)) return 0;
        return isReserved(input) ? 0 : undefined;
      }),
    );
    tensors.push(
      matrix(`${prefix}.attn_k.weight`, n, kvDimension, inputDeviation, (row, input) => {
        if (isMarkerLayer && rope.usedDimensions.has(row)) {
          return input === markerDimension ? (keyWeights.get(row) ?? 0) : 0;
        }
        return isReserved(input) ? 0 : undefined;
      }),
    );
    tensors.push(
      matrix(`${prefix}.attn_v.weight`, n, kvDimension, inputDeviation, (row, input) => {
        if (isMarkerLayer && row === 0) return input === markerDimension ? 1 : 0;
        return isReserved(input) ? 0 : undefined;
      }),
    );
    tensors.push(
      matrix(`${prefix}.attn_output.weight`, qDimension, n, depthScale / Math.sqrt(qDimension), (output, column) => {
        if (isMarkerLayer) {
          const head = Math.floor(column / headDimension);
          const within = column % headDimension;
          if (head === 0) return output === signalDimension && within === 0 ? outputWeight : 0;
          // Other heads sharing the marker's value channel must not copy it.
          if (head < headsPerKvHead && within === 0) return 0;
        }
        return isReserved(output) ? 0 : undefined;
      }),
    );
    tensors.push(normVector(`${prefix}.ffn_norm.weight`));
    tensors.push(
      matrix(`${prefix}.ffn_gate.weight`, n, shape.feedForwardLength, inputDeviation, (_row, input) =>
        isReserved(input) ? 0 : undefined,
      ),
    );
    tensors.push(
      matrix(`${prefix}.ffn_up.weight`, n, shape.feedForwardLength, inputDeviation, (_row, input) =>
        isReserved(input) ? 0 : undefined,
      ),
    );
    tensors.push(
      matrix(
        `${prefix}.ffn_down.weight`,
        shape.feedForwardLength,
        n,
        // silu(gate)·up has a variance of about 0.35 for unit inputs.
        depthScale / Math.sqrt(0.35 * shape.feedForwardLength),
        (output) => (isReserved(output) ? 0 : undefined),
      ),
    );
  }

  tensors.push(normVector("output_norm.weight"));
  const finalOrdinaryScale = (Math.sqrt(finalVariance) * ordinaryGain) / finalRms;
  const outputDeviation = logitDeviation / (Math.sqrt(n - reservedDimensions) * finalOrdinaryScale);
  tensors.push(
    matrix("output.weight", n, vocabularySize, outputDeviation, (token, dimension) => {
      if (dimension === anchorDimension) return (biases.lateBias.get(token) ?? 0) / finalNormalizedAnchor;
      if (dimension === signalDimension) return (biases.earlyBias.get(token) ?? 0) / finalNormalizedSignal;
      if (dimension === markerDimension) return 0;
      return undefined;
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
};

/** llama.cpp's "normal" RoPE rotates pair k of a head by `position·base^(−2k/dh)`. */
function chooseMarkerRopePairs(headDimension: number, base: number, contextLength: number): MarkerRopePairs {
  const pairCount = headDimension / 2;
  const frequency = (pair: number): number => base ** ((-2 * pair) / headDimension);
  const bandPairs: number[] = [];
  for (let pair = 0; pair < pairCount; pair++) {
    if (frequency(pair) >= markerBand.lowest && frequency(pair) <= markerBand.highest) bandPairs.push(pair);
  }
  const staticPair = pairCount - 1;
  if (bandPairs.length < 8 || frequency(staticPair) * contextLength > 0.05) {
    throw new Error(
      `head dimension ${headDimension} with RoPE base ${base} cannot hold the end-of-answer circuit`,
    );
  }
  const usedDimensions = new Set<number>();
  for (const pair of [...bandPairs, staticPair]) {
    usedDimensions.add(2 * pair);
    usedDimensions.add(2 * pair + 1);
  }
  return { bandPairs, staticPair, usedDimensions };
}

type CreateMatrixTensorOptions = {
  readonly name: string;
  readonly inputs: number;
  readonly outputs: number;
  readonly type: GgufTensorType;
  readonly seed: number;
  /** Standard deviation of the uniform random entries. */
  readonly deviation: number;
  /** A fixed value for an entry, or `undefined` for a random one. */
  readonly override?: (output: number, input: number) => number | undefined;
};

/** A `[inputs, outputs]` matrix (ggml order) of seeded uniform noise with optional fixed entries. */
function createMatrixTensor(options: CreateMatrixTensorOptions): GgufTensor {
  const random = createSeededRandom(options.seed, options.name);
  const halfWidth = options.deviation * Math.sqrt(3);
  const { inputs, override } = options;
  return {
    name: options.name,
    dimensions: [inputs, options.outputs],
    type: options.type,
    fill(target, offset) {
      let output = Math.floor(offset / inputs);
      let input = offset - output * inputs;
      for (let index = 0; index < target.length; index++) {
        // Always draw, so fixed entries never shift the random stream.
        const randomValue = (random.next() * 2 - 1) * halfWidth;
        target[index] = override?.(output, input) ?? randomValue;
        input++;
        if (input === inputs) {
          input = 0;
          output++;
        }
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
