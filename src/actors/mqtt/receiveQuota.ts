/**
 * The QoS 1/2 publishes an MQTT 5 client has in flight towards the gateway, by packet id:
 * taken when the PUBLISH arrives, completed by the PUBACK, by the PUBREL of a QoS 2 one
 * (the PUBCOMP answers it at once), or by a refusal of 0x80 or more [MQTT-4.9.0]. A
 * resend of an id in flight (DUP after a reconnect, a QoS 2 before its PUBREL) is the same
 * exchange and takes nothing more. More than the CONNACK's Receive Maximum is a
 * DISCONNECT 0x93 [MQTT-3.3.4-9].
 */
export class ReceiveQuota {
  /** Made on the first QoS 1/2 publish: most clients never send one. */
  private ids: Set<number> | undefined;

  /** false: one more than `maximum` would be in flight. */
  take(id: number, maximum: number): boolean {
    const ids = (this.ids ??= new Set());
    if (ids.has(id)) return true;
    if (ids.size >= maximum) return false;
    ids.add(id);
    return true;
  }

  complete(id: number): void {
    this.ids?.delete(id);
  }

  size(): number {
    return this.ids?.size ?? 0;
  }
}
