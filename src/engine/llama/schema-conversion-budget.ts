import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { countGrammarRepeats } from "./count-grammar-repeats.ts";
import type { PatternGrammar } from "./pattern-grammar.ts";
import type { Position } from "./schema-position.ts";

/**
 * The most properties and `enum` values a schema may declare in all: OpenAI's structured outputs
 * take 5000 properties. Building a local grammar is synchronous and grows with them (30,000
 * properties held the event loop 2.3 s, 300,000 for half a minute), so a local model takes fewer.
 */
export const maxSchemaEntries = 5000;
const maxGrammarEntries = 1000;
/**
 * The most steps (schemas converted, plus `required` names, `allOf` branches and merged
 * properties read) a conversion may take: an `anyOf` branch is converted with its siblings, so a
 * schema of a kilobyte that nests them took seconds (and exponentially longer with every level)
 * without declaring many properties. Real schemas take a few per property.
 */
const maxSchemaSteps = 30_000;
const maxGrammarSteps = 6000;
/**
 * The most characters of property names, constants, descriptions (and the grammars of integer
 * ranges and `uuid`s, see convert-typed-schema.ts) a conversion for a grammar
 * may write out, repetitions included: the grammar, the key it is cached by and a tool's prompt
 * (rendered and tokenized whole: 900,000 characters of descriptions held the event loop 0.6 s)
 * spell each of them out. The edge bounds what a schema declares (120,000 characters of names
 * and constants); this bounds descriptions, and what repeating all that in branches makes of it.
 */
const maxGrammarCharacters = 500_000;
/**
 * The most repeats (see countGrammarRepeats) the length and count ranges of one request's
 * grammars may take in all: a schema alone, or the tools together, since every tool's grammar is
 * built before the prompt's exact length is checked. llama.cpp's grammar parser makes a rule for
 * each optional repeat of a range, synchronously: 0.3 to 0.45 µs each in a bare process here
 * (100,000 took 33 to 43 ms, 500,000 took 135 to 225 ms, linearly), up to twice that in a busy
 * server, and each range may be 1000. So 1000 strings of distinct ranges up to 1000 characters
 * (500,000 repeats) held the event loop 0.38 s for one tool, four such tools 0.87 s and `required`
 * over them (one grammar of them all) 1.37 s, before the request was refused for its length at
 * no cost to its sender. At this bound the grammars of a request take 15 to 35 ms more than
 * without their ranges (100,000 took 35 to 90 ms more). Real schemas bound a few fields, or share
 * their strings' bounds (a hundred strings of `maxLength: 1000` are 1000 repeats): far fewer.
 */
export const maxGrammarRepeats = 50_000;
/**
 * The most work (in the units of pattern-grammar.ts's `work`: reading a pattern, building and
 * running its automaton; 80 to 400 ns each here) the patterns of a schema, or of a request's
 * tools together, may take to analyse: 0.1 to 0.4 s. One pattern takes at most some 600,000 (a
 * 4096-character pattern read, its automaton built to its bound and explored to its own), real
 * ones 200 to 20,000, an e-mail pattern within 254 characters 56,000, an alternation of 200
 * words 72,000. Each pattern was bounded, but a schema's were not: a thousand distinct patterns
 * of 250 KB in all held the event loop two minutes, and the request, refused for a balance of 0
 * only after its schema was converted, cost its sender nothing. Past this bound (a pattern seen
 * before in the schema costs nothing again), further patterns are left to their lengths, as a
 * pattern too intricate to write is.
 */
export const maxPatternWork = 1_000_000;

/**
 * The most checks (member schemas, required names, `enum` values, string lengths counted, the
 * work of a pattern's matcher on a string: constant-meets-keywords.ts) a schema, or a request's
 * tools together, make of their constants: an `enum` beside `anyOf` is checked again in every
 * branch. Past them, constants are taken to meet the rest. Each tool had them all: tools of a
 * 4000-character pattern and a constant checked in 200 branches held the event loop 4 minutes.
 */
const maxConstantChecks = 200_000;

/**
 * What a schema's patterns, or a request's tools', have taken to analyse, and what was found of
 * each: a pattern met again is not analysed again (the shared cache of the last patterns may have
 * let it go meanwhile: a schema that alternated 300 cheap patterns with an intricate one had it
 * analysed, uncounted, at every turn).
 */
interface PatternWork {
  spent: number;
  readonly analysed: Map<string, PatternGrammar>;
}

/**
 * What the schemas of one request's tools may spend together (see {@link createToolsBudget}): four
 * schemas' worth. Each schema within its own budget, 128 tools of 1000 properties each held the
 * event loop 0.9 s before the request was refused for its length.
 */
const toolsBudgetSchemas = 4;

/**
 * What a conversion may spend, see {@link maxSchemaEntries}, {@link maxSchemaSteps},
 * {@link maxGrammarCharacters}; and, spent on the converted schema, {@link maxGrammarRepeats}.
 */
interface Budget {
  entries: number;
  steps: number;
  characters: number;
  repeats: number;
}

/** What several conversions (a request's tools) spend together, and may. */
export interface SharedBudget {
  readonly limits: Budget;
  readonly spent: Budget;
  readonly patterns: PatternWork;
  readonly constantChecks: { left: number };
}

/**
 * The budget a request's tool schemas share, for grammars: {@link toolsBudgetSchemas} schemas'
 * worth, and the repeats of one request ({@link maxGrammarRepeats}); with `grammarLimits` false
 * (the schemas checked alone, for any model: convertJsonSchemaToGbnf), no limit beyond each
 * schema's own. Either way, one request's constant checks ({@link maxConstantChecks}) and pattern
 * work ({@link maxPatternWork}).
 */
export function createToolsBudget(grammarLimits = true): SharedBudget {
  const unlimited = Number.POSITIVE_INFINITY;
  return {
    limits: grammarLimits
      ? {
          entries: maxGrammarEntries * toolsBudgetSchemas,
          steps: maxGrammarSteps * toolsBudgetSchemas,
          characters: maxGrammarCharacters * toolsBudgetSchemas,
          repeats: maxGrammarRepeats,
        }
      : { entries: unlimited, steps: unlimited, characters: unlimited, repeats: unlimited },
    spent: { entries: 0, steps: 0, characters: 0, repeats: 0 },
    patterns: { spent: 0, analysed: new Map() },
    constantChecks: { left: maxConstantChecks },
  };
}

/**
 * Spends the repeats of a converted schema's ranges (see countGrammarRepeats), alone and with
 * the schemas it shares `shared` with, refusing with 400 `invalid_value` naming `param` the schema
 * whose grammar would take more than {@link maxGrammarRepeats}: before any grammar is built.
 */
export function spendGrammarRepeats(schema: GbnfJsonSchema, param: string, shared?: SharedBudget): void {
  const repeats = countGrammarRepeats(schema);
  const refuse = (problem: string) =>
    new AppError("invalid_value", `Invalid JSON Schema in '${param}': ${problem}`, { param });
  if (repeats > maxGrammarRepeats) throw refuse(describeOverspending("repeats", maxGrammarRepeats, true));
  if (shared === undefined) return;
  if (shared.spent.repeats + repeats > shared.limits.repeats)
    throw refuse(describeSharedOverspending("repeats", shared.limits.repeats));
  shared.spent.repeats += repeats;
}

/** What one conversion spends (and what it shares, when it does), refusing the schema that needs more. */
export class ConversionBudget {
  readonly #grammarLimits: boolean;
  readonly #limits: Budget;
  /** What the conversion has spent so far. */
  readonly #spent: Budget = { entries: 0, steps: 0, characters: 0, repeats: 0 };
  readonly #shared: SharedBudget | undefined;
  readonly #patterns: PatternWork;
  readonly #constantChecks: { left: number };
  readonly #refuse: (at: Position, problem: string) => never;

  constructor(options: {
    /** A grammar's limits, or the larger ones of a schema checked alone (see convertJsonSchemaToGbnf). */
    grammarLimits: boolean;
    shared: SharedBudget | undefined;
    /** Throws the error that refuses the schema at `at`. */
    refuse: (at: Position, problem: string) => never;
  }) {
    this.#grammarLimits = options.grammarLimits;
    this.#shared = options.shared;
    this.#patterns = options.shared?.patterns ?? { spent: 0, analysed: new Map() };
    this.#constantChecks = options.shared?.constantChecks ?? { left: maxConstantChecks };
    this.#refuse = options.refuse;
    this.#limits = options.grammarLimits
      ? {
          entries: maxGrammarEntries,
          steps: maxGrammarSteps,
          characters: maxGrammarCharacters,
          repeats: maxGrammarRepeats,
        }
      : {
          entries: maxSchemaEntries,
          steps: maxSchemaSteps,
          characters: Number.POSITIVE_INFINITY,
          repeats: Number.POSITIVE_INFINITY,
        };
  }

  /**
   * What `analyse` finds of the pattern `key` names, and what it took spent; what was found before
   * where `key`'s was analysed already, else `undefined` once the patterns analysed before took
   * {@link maxPatternWork}.
   */
  analysePattern(key: string, analyse: () => PatternGrammar): PatternGrammar | undefined {
    const known = this.#patterns.analysed.get(key);
    if (known !== undefined) return known;
    const analysis = this.spendOnPattern(analyse);
    if (analysis !== undefined) this.#patterns.analysed.set(key, analysis);
    return analysis;
  }

  /**
   * What `work` (a pattern's analysis, or its matcher for constants: constant-meets-keywords.ts)
   * gives, its `work` spent with the patterns' (see {@link maxPatternWork}); `undefined`, without
   * running it, once they took that.
   */
  spendOnPattern<Result extends { work: number }>(work: () => Result): Result | undefined {
    const patterns = this.#patterns;
    if (patterns.spent >= maxPatternWork) return undefined;
    const result = work();
    patterns.spent += result.work;
    return result;
  }

  /** Takes `count` of the constant checks (see maxConstantChecks), or tells that none are left. */
  takeConstantChecks(count: number): boolean {
    this.#constantChecks.left -= count;
    return this.#constantChecks.left >= 0;
  }

  /** The constant checks left (negative once taken past them). */
  get constantChecksLeft(): number {
    return this.#constantChecks.left;
  }

  spendCharacters(at: Position, text: string): void {
    this.spend(at, "characters", text.length);
  }

  /** Spends `amount` more of `kind`, refusing a schema that needs more than its limit (see {@link Budget}). */
  spend(at: Position, kind: keyof Budget, amount: number): void {
    this.reserve(at, kind, amount);
    this.#spent[kind] += amount;
    if (this.#shared !== undefined) this.#shared.spent[kind] += amount;
  }

  /** Refuses now a schema that is sure to need more than its limit of `kind` (`amount` more), before working on it. */
  reserve(at: Position, kind: keyof Budget, amount: number): void {
    const limit = this.#limits[kind];
    if (this.#spent[kind] + amount > limit)
      this.#refuse(at, describeOverspending(kind, limit, this.#grammarLimits));
    const shared = this.#shared;
    if (shared !== undefined && shared.spent[kind] + amount > shared.limits[kind]) {
      this.#refuse(at, describeSharedOverspending(kind, shared.limits[kind]));
    }
  }
}

/** Why a schema that needs more than `limit` of `kind` is refused, and what to change. */
function describeOverspending(kind: keyof Budget, limit: number, grammarLimits: boolean): string {
  const local = grammarLimits ? " (what a local model's output grammar takes)" : "";
  switch (kind) {
    case "entries":
      return `the schema declares more than ${limit} properties and enum values in all${local}; undeclared required properties, the members of constants, and what anyOf or oneOf branches repeat of their siblings count too. Split it, or describe fewer of them.`;
    case "steps":
      return `the schema takes more than ${limit} steps to convert${local}: anyOf and oneOf branches repeat their siblings (properties, items, ...) once each, and required names, allOf branches and each type of a type list count too. Move what the branches share into them, or simplify the schema.`;
    case "characters":
      return `the schema spells out more than ${limit} characters of property names, constants and descriptions (and the grammars of integer ranges and patterns)${local}, counted again each time anyOf or oneOf branches repeat them. Shorten them, or simplify the schema.`;
    case "repeats":
      return `its length and count ranges (minLength to maxLength, minItems to maxItems, minProperties to maxProperties, a pattern's quantifiers) add up to more than ${limit} repeats${local}: each range counts its maximum (its minimum where it has none), a string's range once however many strings share it, an array's or a map's each time. Lower the maximums, give more strings the same ones, or drop those the output does not need (a range without a maximum costs its minimum only).`;
    default: {
      const unreachable: never = kind;
      throw new Error(`unknown budget ${String(unreachable)}`);
    }
  }
}

/** Why a request's tools that together need more than `limit` of `kind` are refused. */
function describeSharedOverspending(kind: keyof Budget, limit: number): string {
  const what =
    kind === "entries"
      ? `declare more than ${limit} properties and enum values`
      : kind === "steps"
        ? `take more than ${limit} steps to convert`
        : kind === "characters"
          ? `spell out more than ${limit} characters of property names, constants and descriptions (and the grammars of integer ranges and patterns)`
          : `have length and count ranges (minLength to maxLength, minItems to maxItems, minProperties to maxProperties, a pattern's quantifiers) of more than ${limit} repeats, each range counting its maximum`;
  const advice =
    kind === "repeats"
      ? "Offer fewer tools, or lower the maximums of their ranges."
      : "Offer fewer tools, or smaller ones.";
  return `the request's tools together ${what} (what a local model's output grammars take for one request). ${advice}`;
}
