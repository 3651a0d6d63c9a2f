import { stat } from "node:fs/promises";
import { checkHeader } from "./check-model-file.ts";

/**
 * Whether a GGUF file holds all the tensor data its header describes:
 * - `complete`: every tensor ends within the file;
 * - `truncated`: the header cannot be read, or a tensor ends past the file's end (`reason` says
 *   which), as when a download was cut short by a server that did not tell the file's size;
 * - `unknown`: a tensor's type is one whose byte size is not known here; nothing is claimed.
 */
export type GgufCompleteness =
  | { status: "complete" }
  | { status: "truncated"; reason: string }
  | { status: "unknown"; reason: string };

/**
 * Elements per block and bytes per block of the ggml types (ggml.c's `type_traits`), by type id.
 * Types missing here (the retired `Q4_2`, the repacked `Q4_0_4_4` family, very new ones) make a
 * file's completeness `unknown` rather than failing it.
 */
const ggmlTypeBlocks: ReadonlyMap<number, { elements: number; bytes: number }> = new Map([
  [0, { elements: 1, bytes: 4 }], // F32
  [1, { elements: 1, bytes: 2 }], // F16
  [2, { elements: 32, bytes: 18 }], // Q4_0
  [3, { elements: 32, bytes: 20 }], // Q4_1
  [6, { elements: 32, bytes: 22 }], // Q5_0
  [7, { elements: 32, bytes: 24 }], // Q5_1
  [8, { elements: 32, bytes: 34 }], // Q8_0
  [9, { elements: 32, bytes: 36 }], // Q8_1
  [10, { elements: 256, bytes: 84 }], // Q2_K
  [11, { elements: 256, bytes: 110 }], // Q3_K
  [12, { elements: 256, bytes: 144 }], // Q4_K
  [13, { elements: 256, bytes: 176 }], // Q5_K
  [14, { elements: 256, bytes: 210 }], // Q6_K
  [15, { elements: 256, bytes: 292 }], // Q8_K
  [16, { elements: 256, bytes: 66 }], // IQ2_XXS
  [17, { elements: 256, bytes: 74 }], // IQ2_XS
  [18, { elements: 256, bytes: 98 }], // IQ3_XXS
  [19, { elements: 256, bytes: 50 }], // IQ1_S
  [20, { elements: 32, bytes: 18 }], // IQ4_NL
  [21, { elements: 256, bytes: 110 }], // IQ3_S
  [22, { elements: 256, bytes: 82 }], // IQ2_S
  [23, { elements: 256, bytes: 136 }], // IQ4_XS
  [24, { elements: 1, bytes: 1 }], // I8
  [25, { elements: 1, bytes: 2 }], // I16
  [26, { elements: 1, bytes: 4 }], // I32
  [27, { elements: 1, bytes: 8 }], // I64
  [28, { elements: 1, bytes: 8 }], // F64
  [29, { elements: 256, bytes: 56 }], // IQ1_M
  [30, { elements: 1, bytes: 2 }], // BF16
  [34, { elements: 256, bytes: 54 }], // TQ1_0
  [35, { elements: 256, bytes: 66 }], // TQ2_0
  [39, { elements: 32, bytes: 17 }], // MXFP4
]);

/**
 * Checks that the file at `path` holds the whole tensor data section its GGUF header describes:
 * each tensor starts at the data offset (the end of the tensor descriptions, aligned to
 * `general.alignment`) plus its own offset, and takes whole blocks of its type. A download cut
 * short by a server that sent no `Content-Length` (or too small a one) starts like a GGUF file
 * and would otherwise be saved as one, and llama.cpp would refuse it only when loading it
 * ("tensor data is not within the file bounds"). Reads the header only, never the weights.
 * A file without tensors needs nothing after its header (llama.cpp loads it so).
 */
export async function checkGgufComplete(path: string): Promise<GgufCompleteness> {
  let tensors: readonly {
    name: string;
    dimensions: readonly (number | bigint)[];
    ggmlType: number;
    fileOffset: number | bigint;
  }[];
  let fileBytes: bigint;
  let dataOffset: bigint;
  try {
    // Rejects counts no file of this size can hold before the reader builds that many entries.
    await checkHeader(path);
    fileBytes = BigInt((await stat(path)).size);
    const { readGgufFileInfo } = await import("node-llama-cpp");
    const info = await readGgufFileInfo(path, {
      sourceType: "filesystem",
      readTensorInfo: true,
      logWarnings: false,
    });
    tensors = info.fullTensorInfo ?? info.tensorInfo ?? [];
    dataOffset = BigInt(info.infoEndOffset ?? 0);
  } catch (error) {
    const message = describeError(error).replace(`${path}: `, "");
    return { status: "truncated", reason: `its GGUF header cannot be read: ${message}` };
  }
  // A header cut short reads as zeros past the file's end, which could describe empty tensors.
  let end = tensors.length > 0 ? dataOffset : 0n;
  let endName = "the tensor descriptions";
  for (const tensor of tensors) {
    const block = ggmlTypeBlocks.get(tensor.ggmlType);
    if (block === undefined) {
      return { status: "unknown", reason: `tensor ${tensor.name} has ggml type ${tensor.ggmlType}` };
    }
    const [innermost = 1n, ...others] = tensor.dimensions.map((dimension) => BigInt(dimension));
    if (innermost % BigInt(block.elements) !== 0n) {
      return { status: "unknown", reason: `tensor ${tensor.name} is not a whole number of blocks` };
    }
    const rows = others.reduce((product, dimension) => product * dimension, 1n);
    const bytes = (innermost / BigInt(block.elements)) * BigInt(block.bytes) * rows;
    const tensorEnd = BigInt(tensor.fileOffset) + bytes;
    if (tensorEnd > end) {
      end = tensorEnd;
      endName = `tensor ${tensor.name}`;
    }
  }
  if (end > fileBytes) {
    return {
      status: "truncated",
      reason: `its tensor data ends at byte ${end} (${endName}), but the file has ${fileBytes} bytes`,
    };
  }
  return { status: "complete" };
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
