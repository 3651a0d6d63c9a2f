import type { Migration } from "kysely/migration";
import { accountsAndKeys } from "./001-accounts-and-keys.ts";
import { billing } from "./002-billing.ts";
import { usageByTime } from "./003-usage-by-time.ts";
import { accountSpent } from "./004-account-spent.ts";
import { accountsByCreation } from "./005-accounts-by-creation.ts";
import { keysByCreation } from "./006-keys-by-creation.ts";

/**
 * Every migration, in order; the names sort in the order they run. Add new ones at the end
 * with the next number, never rename or edit one that has shipped.
 */
export const migrations: Readonly<Record<string, Migration>> = {
  "001_accounts_and_keys": accountsAndKeys,
  "002_billing": billing,
  "003_usage_by_time": usageByTime,
  "004_account_spent": accountSpent,
  "005_accounts_by_creation": accountsByCreation,
  "006_keys_by_creation": keysByCreation,
};
