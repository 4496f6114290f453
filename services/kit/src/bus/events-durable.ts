import { Config, Duration, Option } from "effect"

/** A unit's durable on the EVENTS stream, as its configuration names it. */
export interface EventsDurable {
  readonly durable: string
  readonly deliverPolicy: "all" | "new"
  readonly inactiveSeconds: Option.Option<number>
}

/**
 * `<PREFIX>_EVENTS_DURABLE` (replicas share it; tests give every system its own),
 * `<PREFIX>_EVENTS_DELIVER_POLICY` (where a new durable starts) and
 * `<PREFIX>_EVENTS_INACTIVE_SECONDS` (NATS removes an idle durable after this: throwaway test systems).
 */
export const eventsDurableConfig = (prefix: string, defaults: { readonly durable: string; readonly deliverPolicy: "all" | "new" }): Config.Config<EventsDurable> =>
  Config.all({
    durable: Config.string(`${prefix}_EVENTS_DURABLE`).pipe(Config.withDefault(defaults.durable)),
    deliverPolicy: Config.literal("all", "new")(`${prefix}_EVENTS_DELIVER_POLICY`).pipe(Config.withDefault(defaults.deliverPolicy)),
    inactiveSeconds: Config.option(Config.integer(`${prefix}_EVENTS_INACTIVE_SECONDS`))
  })

/** The consume options of such a durable over `filterSubjects` on EVENTS. */
export const eventsConsumeOptions = (config: EventsDurable, filterSubjects: ReadonlyArray<string>) => ({
  stream: "EVENTS" as const,
  durable: config.durable,
  filterSubjects,
  deliverPolicy: config.deliverPolicy,
  ...Option.match(config.inactiveSeconds, { onNone: () => ({}), onSome: (s) => ({ inactiveThreshold: Duration.seconds(s) }) })
})
