// Waiting on a condition with a generous deadline (never on a time window), for the Node suites.

/** How long a condition may take on a loaded two-core machine. */
export const PATIENCE = 60000;

/** Waits until `check` returns a truthy value (returned) or fails with `what` and the last value. */
export async function eventually(what, check, patience = PATIENCE) {
  const deadline = Date.now() + patience;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last && !last.mismatch) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${patience / 1000} s; last: ${JSON.stringify(last?.mismatch ?? last?.message ?? last)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
