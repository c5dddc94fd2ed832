/**
 * Refusals NATS reported (`-ERR Permissions Violation for Publish to ...`) and no publish
 * has claimed yet, counted per subject: two refused publishes to one subject whose -ERRs
 * arrive in one read must both be answered "not authorized" (a set let the first claim the
 * only entry and the second be acknowledged). Both doors settle publishes against one.
 */
export class RefusalTally {
  private readonly counts = new Map<string, number>();
  add(subject: string): void {
    this.counts.set(subject, (this.counts.get(subject) ?? 0) + 1);
  }
  /** Claims one refusal of the subject; false when none is waiting. */
  delete(subject: string): boolean {
    const n = this.counts.get(subject);
    if (n === undefined) return false;
    if (n > 1) this.counts.set(subject, n - 1);
    else this.counts.delete(subject);
    return true;
  }
}
