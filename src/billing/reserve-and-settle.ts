/**
 * Billing for chat requests: reserve, run, settle, in integer nano-units.
 *
 *   1. Request rate: spend one unit of the key's rpm bucket, else 429.
 *   2. (The engine measures the request: prompt tokens and the most completion tokens it can
 *      produce; a request over the context is refused here with 400.)
 *   3. Token rate: spend `prompt + max completion` tokens of the key's tpm bucket, else 429.
 *   4. Reserve: the maximum cost, `ceil((prompt × input + max completion × output) / 10^6)`,
 *      is set aside atomically against the account's available balance (balance minus open
 *      reservations) by the store (see `Store.reserve`), else 403 `insufficient_balance`. This happens
 *      before the request waits in the model's queue. When fallback models may serve the
 *      request, the maximum is taken at the dearest model's prices.
 *   5. Run. Whatever happens next (finished, failed, aborted by the client or cut by a
 *      shutdown), the ticket is settled exactly once.
 *   6. Settle: the real cost from the real token counts (0 when no completion token was
 *      produced), at the prices of the model that served (a fallback's own), is charged, the
 *      reservation removed and the usage row written, all in one store transaction, before the
 *      last byte reaches the client. The tpm bucket gets back what the estimate overstated.
 *      A cost above the reservation (an upstream's prompt count above our estimate) is charged
 *      only as far as the account's available balance pays it: balances are never overspent.
 *
 * A replica keeps the leases of its open reservations alive; a replica that starts releases
 * what its previous run left (see `releaseLeftOverReservations`).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type {
  AdmissionContext,
  AdmissionRequest,
  AdmissionTicket,
  ChatAdmission,
  RunOutcome,
} from "../chat/chat-admission.ts";
import { describeModelNotAllowed } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
import type { KeyLimits } from "../limits/key-limits.ts";
import type { ReserveResult, Store, UsageRecord } from "../store/store.ts";
import {
  type BillingAdmissionOptions,
  DRAIN_SETTLE_TIMEOUT_MS,
  SETTLE_RETRY_DELAYS_MS,
  SLOW_SETTLE_FAILURE_MS,
} from "./billing-admission-options.ts";
import { ChatPriceList, type ChatPrices } from "./chat-prices.ts";
import { createReservationId } from "./create-reservation-id.ts";
import { DrainSettleTimeoutError } from "./drain-settle-timeout-error.ts";
import { DrainTimeLimit } from "./drain-time-limit.ts";
import { JournaledCharges } from "./journaled-charges.ts";
import { mayHaveReserved } from "./may-have-reserved.ts";
import { costOfUsage, formatAmount } from "./money.ts";
import { UnclearReservations } from "./unclear-reservations.ts";
import { UnfinishedSettlements } from "./unfinished-settlements.ts";

/** How long a reservation's lease lasts without renewal. */
export const RESERVATION_LEASE_MS = 60_000;

/** Rate limits and billing for the chat pipeline. */
export class BillingAdmission implements ChatAdmission {
  readonly #store: Store;
  readonly #limits: KeyLimits;
  readonly #replicaId: string;
  readonly #now: () => number;
  readonly #leaseNow: () => number;
  readonly #onSettleError: NonNullable<BillingAdmissionOptions["onSettleError"]>;
  readonly #retryDelays: NonNullable<BillingAdmissionOptions["settleRetryDelaysMs"]>;
  /** The charges kept in the journal while the store does not take them. */
  readonly #journaled: JournaledCharges;
  readonly #prices = new ChatPriceList();
  /** Ids of the reservations of requests running or waiting for their settlement. */
  readonly #live = new Set<string>();
  /** Settle attempts under way and settlements waiting to be retried: {@link close} ends them. */
  readonly #settlements: UnfinishedSettlements;
  /** Begun by {@link beginClosing}: delivered charges go to the journal first, attempts are time-limited. */
  readonly #drain: DrainTimeLimit;
  /** The charges their requests are settling now (before their last byte), by id; `streamed`: delivered. */
  readonly #settling = new Map<string, { usage: UsageRecord; streamed: boolean }>();
  /** Reservations whose reserve may have gone through unanswered, being released. */
  readonly #releases: UnclearReservations;

  constructor(options: BillingAdmissionOptions) {
    this.#store = options.store;
    this.#limits = options.limits;
    this.#replicaId = options.replicaId;
    this.#now = options.now ?? Date.now;
    this.#leaseNow = options.leaseNow ?? this.#now;
    this.#onSettleError = options.onSettleError ?? (() => {});
    const onSettleRecovered = options.onSettleRecovered ?? (() => {});
    this.#retryDelays = options.settleRetryDelaysMs ?? SETTLE_RETRY_DELAYS_MS;
    this.#journaled = new JournaledCharges(options.journal, options.onJournalError ?? (() => {}));
    this.#drain = new DrainTimeLimit(options.drainSettleTimeoutMs ?? DRAIN_SETTLE_TIMEOUT_MS);
    this.#releases = new UnclearReservations(this.#store, this.#retryDelays.background);
    this.#settlements = new UnfinishedSettlements({
      delays: this.#retryDelays.background,
      settleOnce: (usage) => this.#settleOnce(usage),
      onRecovered: (usage, chargedNano, attempts) => {
        this.#live.delete(usage.id);
        this.#journaled.paid(usage.id);
        onSettleRecovered(usage.requestId, attempts, { model: usage.model, chargedNano });
      },
      onGivenUp: (error, usage) => {
        this.#live.delete(usage.id);
        const journaled = this.#journaled.has(usage.id);
        this.#onSettleError(error, usage.requestId, { retrying: false, usage, journaled });
      },
    });
  }

  /**
   * A shutdown began: from now on every charge of a streamed answer (the client has it already)
   * is written to the journal before it is settled, those being settled now and those waiting
   * for a retry at once, and a settle attempt waits for the store at most `drainSettleTimeoutMs`
   * (see `DRAIN_SETTLE_TIMEOUT_MS`: a SIGKILL at any point of the drain loses no charge). A whole
   * answer is sent only after its settle: journaled up front, a SIGKILL while the store took its
   * charge had the next start charge an answer never sent. Its charge goes to the journal only
   * when its attempt is given up on, just before the answer goes out, as after a failed settle.
   * A settle that commits after all takes its charge out of the journal. A charge the journal
   * could not take waits for the store as before: giving up on it would lose it.
   */
  beginClosing(): void {
    if (this.#drain.begun) return;
    for (const { usage, streamed } of this.#settling.values()) if (streamed) this.#journaled.owe(usage);
    for (const usage of this.#settlements.waitingUsages()) this.#journaled.owe(usage);
    this.#drain.begin();
  }

  /**
   * Settles, in the background, charges a previous run owed that the store did not take at this
   * start (see `recordOwedCharges`): they are in the journal already, and stay there until taken.
   */
  retryOwed(usages: readonly UsageRecord[]): void {
    for (const usage of usages) {
      this.#journaled.noteOwed(usage.id);
      this.#settlements.retryInBackground(usage, async () => {});
    }
  }

  /** Settlements still waiting to go through (their reservations still hold the money). */
  get pendingSettlements(): number {
    return this.#settlements.waiting;
  }

  /**
   * Tries the first charge waiting for the store now rather than at the end of its pause, and
   * the rest at once if it goes through (see `UnfinishedSettlements.probeNow`).
   */
  probePendingSettlements(): void {
    this.#settlements.probeNow();
  }

  /**
   * The reservations this server knows to be open: of requests running or waiting for their
   * settlement to go through. Only these have their leases renewed (server.ts): a reservation
   * the store made although its answer never came back (a reserve cut off by a network
   * partition) belongs to no request, and is released once its lease has expired.
   */
  get liveReservationIds(): string[] {
    return [...this.#live];
  }

  /**
   * Tries every pending settlement once more, now; what still fails is reported as given up
   * (with its usage, so it can be recorded by hand) and its reservation is released at the
   * next start. Call before the store closes.
   */
  async close(): Promise<void> {
    this.beginClosing();
    this.#releases.stop();
    await this.#settlements.close();
  }

  async checkRequestRate(context: AdmissionContext): Promise<void> {
    await this.#limits.takeRequest(context.key, context.setHeader);
  }

  async checkTokenRate(context: AdmissionContext, tokens: number): Promise<void> {
    // Taken to learn whether there is room (429 if not), and given back at once: the request is
    // refused either way, and refused requests cost nothing.
    const taken = await this.#limits.takeTokens(context.key, tokens, context.setHeader);
    await this.#limits.returnTokens(context.key, taken, context.setHeader);
  }

  async admit(request: AdmissionRequest): Promise<AdmissionTicket> {
    const { key, model } = request;
    const accountId = key.accountId;
    // Refused before this (isModelAllowedForKey); kept as the backstop of the money's owner.
    if (accountId === undefined) {
      throw new AppError("model_not_allowed", describeModelNotAllowed(key, model.id), { param: "model" });
    }
    // What the key's tpm bucket gave: none without a limit, or while Redis is away (fail-open).
    const takenTokens = await this.#limits.takeTokens(
      key,
      request.promptTokens + request.maxCompletionTokens,
      request.setHeader,
    );
    const prices = this.#prices.of(model);
    // A fallback may serve the request at its own prices: set aside what the dearest would cost.
    let amountNano = 0n;
    let dearest = model;
    for (const candidate of [model, ...(request.alternateModels ?? [])]) {
      if (candidate.pricing.kind !== "chat") continue;
      // A fallback generates no more than its own context leaves, and one whose context cannot
      // hold the request costs nothing: priced at the primary's room, a small fallback behind a
      // large upstream model held up to twice what either could cost (or what it would refuse),
      // and refused a balance that paid for the request with 403.
      const bound = candidate === model ? undefined : request.alternateBounds?.get(candidate.id);
      if (bound?.refuses === true) continue;
      const cost = costOfUsage({
        promptTokens: bound?.promptTokens ?? request.promptTokensAtMost ?? request.promptTokens,
        completionTokens: bound?.completionTokens ?? request.maxCompletionTokens,
        ...this.#prices.of(candidate),
      });
      if (cost > amountNano) {
        amountNano = cost;
        dearest = candidate;
      }
    }
    const now = this.#now();
    const reservationId = createReservationId(now);
    let reserved: ReserveResult;
    try {
      reserved = await this.#store.reserve({
        id: reservationId,
        requestId: request.requestId,
        accountId,
        keyPublicId: key.publicId,
        model: model.id,
        amountNano,
        replicaId: this.#replicaId,
        leaseExpiresAt: new Date(this.#leaseNow() + RESERVATION_LEASE_MS),
        createdAt: new Date(now),
      });
    } catch (error) {
      // Refused (the store is down or locked: 503): nothing runs, nothing is settled, and the
      // tokens taken would otherwise stay spent until the bucket refills.
      await this.#limits.returnTokens(key, takenTokens, request.setHeader).catch(() => {});
      // A reserve that may have gone through unanswered (a database that hung runs it when it
      // resumes) would hold the account's money until its lease expired and a sweep released it
      // (over a minute of wrong 403s for an account near its limit): released here instead.
      if (mayHaveReserved(error)) {
        this.#releases.release({
          id: reservationId,
          requestId: request.requestId,
          accountId,
          keyPublicId: key.publicId,
          model: model.id,
          user: request.user,
          createdAt: new Date(now),
        });
      }
      throw error;
    }
    if (reserved !== "reserved") {
      await this.#limits.returnTokens(key, takenTokens, request.setHeader);
      const money = await this.#store.getAccountBalance(accountId);
      const available = money === undefined ? 0n : money.balanceNano - money.reservedNano;
      throw new AppError(
        "insufficient_balance",
        `Your account's available balance (${formatAmount(available < 0n ? 0n : available)}) is below this request's maximum cost (${formatAmount(amountNano)}): its prompt plus max_tokens, or, when max_tokens is not set, plus the most the model may generate${dearest === model ? "" : `, at the prices of '${dearest.id}', the dearest of the fallbacks that may serve it`}. Add credit, or set a lower max_tokens or send shorter messages to reduce the maximum cost.`,
      );
    }
    this.#live.add(reservationId);
    let settled = false;
    return {
      settle: async (outcome: RunOutcome) => {
        if (settled) return;
        settled = true;
        await this.#settlements.track(
          this.#settle({ request, reservationId, accountId, prices, takenTokens, outcome }),
        );
      },
    };
  }

  async #settle(settlement: {
    request: AdmissionRequest;
    reservationId: string;
    accountId: string;
    prices: ChatPrices;
    takenTokens: number;
    outcome: RunOutcome;
  }): Promise<void> {
    const { request, accountId, takenTokens, outcome } = settlement;
    const promptTokens = outcome.usage.promptTokens ?? request.promptTokens;
    const completionTokens = outcome.usage.completionTokens ?? 0;
    // Charged at the prices of the model that served (a fallback), and recorded under its id.
    const servedBy = outcome.servedBy?.pricing.kind === "chat" ? outcome.servedBy : undefined;
    const prices = servedBy === undefined ? settlement.prices : this.#prices.of(servedBy);
    const usageCostNano = costOfUsage({ promptTokens, completionTokens, ...prices });
    const costNano = outcome.unanswered === true ? 0n : usageCostNano;
    request.annotate({ promptTokens, completionTokens });
    const usage: UsageRecord = {
      id: settlement.reservationId,
      requestId: request.requestId,
      accountId,
      keyPublicId: request.key.publicId,
      model: (servedBy ?? request.model).id,
      promptTokens,
      completionTokens,
      costNano,
      finishReason: outcome.finishReason,
      errorCode: outcome.errorCode,
      user: request.user,
      queueMs: outcome.timings.queueMs,
      firstTokenMs: outcome.timings.firstPartMs,
      totalMs: outcome.timings.totalMs,
      estimated: outcome.usage.estimated === true,
      createdAt: new Date(this.#now()),
    };
    this.#settling.set(usage.id, { usage, streamed: request.streamed !== false });
    try {
      await this.#settleUsage(usage, request, takenTokens, usageCostNano, outcome);
    } finally {
      this.#settling.delete(usage.id);
    }
  }

  async #settleUsage(
    usage: UsageRecord,
    request: AdmissionRequest,
    takenTokens: number,
    usageCostNano: bigint,
    outcome: RunOutcome,
  ): Promise<void> {
    // A shutdown under way: a charge whose answer the client has is kept beyond this process
    // before the store is asked; a whole answer's once the store failed it (see beginClosing).
    const streamed = request.streamed !== false;
    if (this.#drain.begun && streamed) this.#journaled.owe(usage);
    const charged = async (chargedNano: bigint) => {
      // Less than the usage's cost where the reservation fell short and the account could pay no
      // more (an upstream prompt above its estimate), or where the client got an error instead of
      // the answer (unanswered): the difference is logged, never owed.
      request.annotate({
        cost: formatAmount(chargedNano),
        uncharged: chargedNano < usageCostNano ? formatAmount(usageCostNano - chargedNano) : undefined,
      });
      // The bucket gets back what the estimate overstated (all of it where the run never began);
      // a limiter that cannot be reached (Redis) only leaves the bucket a little emptier until it
      // refills.
      const usedTokens = outcome.unstarted === true ? 0 : usage.promptTokens + usage.completionTokens;
      await this.#limits
        .correctTokens(request.key, takenTokens, usedTokens, request.setHeader)
        .catch(() => {});
    };
    let lastError: unknown;
    for (const delay of [0, ...this.#retryDelays.beforeAnswer]) {
      if (delay > 0) await sleep(delay);
      let chargedNano: bigint;
      const startedAt = performance.now();
      try {
        chargedNano = await this.#settleOnce(usage, !streamed);
      } catch (error) {
        lastError = error;
        // A store that took this long to fail is down, not blinking: the client is not held for
        // more of its timeouts (each 30 s on PostgreSQL), the charge goes on in the background.
        if (error instanceof DrainSettleTimeoutError) break;
        if (performance.now() - startedAt >= SLOW_SETTLE_FAILURE_MS) break;
        continue;
      }
      this.#settling.delete(usage.id);
      this.#live.delete(usage.id);
      this.#journaled.paid(usage.id);
      // The store takes writes again: the charges waiting for it need not wait out their pause.
      this.#settlements.retryNow();
      await charged(chargedNano);
      return;
    }
    // Before the client hears its answer is complete: kept beyond this process.
    this.#journaled.owe(usage);
    const journaled = this.#journaled.has(usage.id);
    if (this.#settlements.closing) {
      // Shutting down: no later attempt would run. Given up, with what is needed to record it.
      this.#live.delete(usage.id);
      this.#onSettleError(lastError, request.requestId, { retrying: false, usage, journaled });
      return;
    }
    // The client gets its answer; the charge goes through when the store is back.
    this.#onSettleError(lastError, request.requestId, { retrying: true, usage, journaled });
    this.#settlements.retryInBackground(usage, charged);
  }

  /**
   * One settle attempt. Once a shutdown began, one whose charge is in the journal when its time
   * is up (`journalAtLimit`: written there then) waits at most `drainSettleTimeoutMs` (see
   * {@link beginClosing}), and is left to go on: should it commit, the charge leaves the journal.
   */
  #settleOnce(usage: UsageRecord, journalAtLimit = false): Promise<bigint> {
    return this.#drain.limit(
      this.#store.settle(this.#stampNow(usage)),
      () => {
        if (journalAtLimit) this.#journaled.owe(usage);
        return this.#journaled.has(usage.id);
      },
      () => {
        this.#live.delete(usage.id);
        this.#journaled.paid(usage.id);
      },
    );
  }

  /**
   * The usage row as the attempt about to be made writes it: stamped with the time of that attempt,
   * so that rows become visible in the order of their times (as far as the clocks of replicas
   * agree). A row whose settle was retried (in the background after a store outage, say) would
   * otherwise commit with an older time than rows written before it, and a client polling the
   * usage listing with `after=<next_after>` would never see it. (A settle that committed but
   * whose answer was lost is not written again: the row's id is its reservation's.)
   */
  #stampNow(usage: UsageRecord): UsageRecord {
    return { ...usage, createdAt: new Date(this.#now()) };
  }
}
