/** One subscription nats-server's monitor lists, with the connection that holds it. */
export interface MonitoredSubscription {
  readonly cid: number;
  /** The connection's name (the gateway names its client connections `... client`). */
  readonly connection: string | undefined;
  readonly subject: string;
  readonly sid: string;
  readonly qgroup: string | undefined;
}

/** Every subscription of every connection, from `/connz?subs=detail` on nats-server's monitor port. */
export async function natsSubscriptions(monitorPort: number): Promise<MonitoredSubscription[]> {
  const connz = (await (await fetch(`http://127.0.0.1:${monitorPort}/connz?subs=detail`)).json()) as {
    connections: Array<{
      cid: number;
      name?: string;
      subscriptions_list_detail?: Array<{ subject: string; sid: string; qgroup?: string }>;
    }>;
  };
  return connz.connections.flatMap((c) =>
    (c.subscriptions_list_detail ?? []).map((s) => ({
      cid: c.cid,
      connection: c.name,
      subject: s.subject,
      sid: s.sid,
      qgroup: s.qgroup,
    })),
  );
}
