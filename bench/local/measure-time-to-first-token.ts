import { postChatCompletion } from "./chat-client.ts";
import type { DirectRunner } from "./direct-runner.ts";
import {
  type BenchClient,
  type LocalBenchOptions,
  messages,
  sampling,
  TINY_MODEL,
} from "./local-bench-setup.ts";

/** Milliseconds to the first token on each side, sample by sample. */
export interface TimeToFirstTokenReport {
  direct: number[];
  tollgate: number[];
}

/**
 * Time to first token on the tiny model, one request at a time, the two sides alternating: direct
 * from the prompt text to the first complete token; Tollgate from sending a streamed request to the
 * first content chunk (authentication, limits, the reservation and the prompt count included).
 */
export async function measureTimeToFirstToken(options: {
  options: LocalBenchOptions;
  client: BenchClient;
  directTiny: DirectRunner;
  say: (text: string) => void;
}): Promise<TimeToFirstTokenReport> {
  options.say(`time to first token, ${options.options.ttftSamples} samples per side`);
  const report: TimeToFirstTokenReport = { direct: [], tollgate: [] };
  const tollgate = async () => {
    const outcome = await postChatCompletion({
      ...options.client,
      body: {
        model: TINY_MODEL,
        messages,
        max_tokens: 4,
        temperature: sampling.temperature,
        top_p: sampling.topP,
        seed: sampling.seed,
        stream: true,
      },
    });
    if (outcome.firstContentMilliseconds === undefined) throw new Error("a stream without content");
    return outcome.firstContentMilliseconds;
  };
  for (let warmup = 0; warmup < 5; warmup++) {
    await options.directTiny.timeToFirstText(sampling);
    await tollgate();
  }
  for (let sample = 0; sample < options.options.ttftSamples; sample++) {
    if (sample % 2 === 0) {
      report.direct.push(await options.directTiny.timeToFirstText(sampling));
      report.tollgate.push(await tollgate());
    } else {
      report.tollgate.push(await tollgate());
      report.direct.push(await options.directTiny.timeToFirstText(sampling));
    }
  }
  return report;
}
