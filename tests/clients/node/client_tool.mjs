// client_tool.mjs: KafkaJS 2.2.4 / @platformatic/kafka 1.35 consumer for groupd's real-client tests.
//   node client_tool.mjs kafkajs|platformatic MODE BOOTSTRAP [key=value ...]
// Security (KafkaJS), librdkafka's key names: ssl.ca.location, ssl.certificate.location, ssl.key.location
// (files; any of them turns TLS on), sasl.mechanism (PLAIN|SCRAM-SHA-256|SCRAM-SHA-512), sasl.username, sasl.password;
// sasl.mechanism=OAUTHBEARER with sasl.oauthbearer.token (a JWT the test minted) for oauthBearerProvider.
// MODE: assign topic=T seconds=S          (no group: metadata + offsets (+ Fetch for platformatic))
//       subscribe topic=T group=G seconds=S [instance=ID] [session.ms=N] [commit=true] [mode=committed]
//                 [commit_offset=N]  (platformatic: commits N for every partition it is assigned)
//                 platformatic group.protocol=consumer: KIP-848 (ConsumerGroupHeartbeat); the server owns the
//                 session and heartbeat settings; assignment changes are seen by watching consumer.assignments
//       commit group=G topic=T partition=P offset=N     fetch group=G topic=T
// seconds=0: until stdin closes or SIGTERM. Libraries come from $KAFKA_TEST_CLIENTS/node/node_modules.
// stdout: one JSON object per line (see ../README.md); library logs go to stderr. Exit 0 iff no error.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const [lib, mode, bootstrap, ...rest] = process.argv.slice(2)
if (!['kafkajs', 'platformatic'].includes(lib) || !mode || !bootstrap || rest.some(a => !a.includes('='))) {
  console.error('usage: node client_tool.mjs kafkajs|platformatic assign|subscribe|commit|fetch BOOTSTRAP [key=value ...]')
  process.exit(2)
}
const opts = Object.fromEntries(rest.map(a => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]))
const need = k => {
  if (opts[k] === undefined) { console.error(`missing ${k}=...`); process.exit(2) }
  return opts[k]
}
// Java-style dotted keys mapped onto both libraries' option names (ms values)
const DOTTED = { 'session.timeout.ms': 'sessionTimeout', 'heartbeat.interval.ms': 'heartbeatInterval',
  'rebalance.timeout.ms': 'rebalanceTimeout', 'fetch.max.wait.ms': 'maxWaitTime', 'metadata.max.age.ms': 'metadataMaxAge' }
let requestTimeout, groupProtocol // request.timeout.ms: KafkaJS requestTimeout; platformatic timeout + requestTimeout (30 s: a slower JoinGroup fails)
const groupOpts = {}
if (opts['session.ms']) groupOpts.sessionTimeout = Number(opts['session.ms'])
if (opts['group.instance.id']) opts.instance = opts['group.instance.id']
for (const [k, v] of Object.entries(opts)) {
  if (!k.includes('.') || k === 'session.ms' || k === 'group.instance.id') continue
  if (DOTTED[k]) groupOpts[DOTTED[k]] = Number(v)
  else if (k === 'request.timeout.ms') requestTimeout = Number(v)
  else if (k === 'group.protocol' && lib === 'platformatic') groupProtocol = v
  else if (k.startsWith('ssl.') || k.startsWith('sasl.')) continue // security options, below
  else console.error(`client_tool: ignoring unsupported option ${k}`)
}
if (opts.assignor && opts.assignor !== 'roundrobin') console.error(`client_tool: ${lib} only has roundrobin, ignoring assignor=${opts.assignor}`)

const file = k => opts[k] && readFileSync(opts[k], 'utf8')
const security = {}
if (['ssl.ca.location', 'ssl.certificate.location', 'ssl.key.location'].some(k => opts[k])) {
  security.ssl = { ca: file('ssl.ca.location'), cert: file('ssl.certificate.location'), key: file('ssl.key.location') }
}
if (opts['sasl.mechanism']) {
  security.sasl = { mechanism: opts['sasl.mechanism'].toLowerCase(), username: opts['sasl.username'], password: opts['sasl.password'] }
  if (opts['sasl.oauthbearer.token']) security.sasl.oauthBearerProvider = async () => ({ value: opts['sasl.oauthbearer.token'] })
}

const base = process.env.KAFKA_TEST_CLIENTS || join(homedir(), '.cache', 'groupd-clients')
const require = createRequire(join(base, 'node', 'package.json'))

let errors = 0, polls = 0, assignment = [], stopping = false
const emit = obj => process.stdout.write(JSON.stringify(obj, (k, v) => typeof v === 'bigint' ? Number(v) : v) + '\n')
// platformatic wraps protocol errors in an AggregateError: report the inner ones too (e.g. FENCED_INSTANCE_ID)
const describe = e => [String(e?.message ?? e), ...(e?.errors ?? []).map(describe), ...(e?.cause ? [describe(e.cause)] : []),
  ...(e?.response?.errorCode !== undefined ? [`errorCode=${e.response.errorCode}`] : []),
  ...(e?.apiCode !== undefined ? [`apiCode=${e.apiCode}`] : []), ...(e?.apiId ? [e.apiId] : [])].join('; ')
const error = e => { errors++; if (process.env.CLIENT_TOOL_DEBUG) console.error(e); emit({ event: 'error', type: e?.name || e?.constructor?.name || 'Error', message: describe(e) }) }
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const names = parts => parts.map(([t, p]) => `${t}-${p}`).sort()

// resolves when the run should end: after S seconds, or (S=0) on stdin EOF; always on SIGTERM/SIGINT
let stop
const stopped = new Promise(resolve => { stop = () => { stopping = true; resolve() } })
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
function arm (seconds) {
  if (seconds > 0) setTimeout(stop, seconds * 1000).unref()
  else { process.stdin.on('end', stop).on('error', stop); process.stdin.resume() }
}
// repeat loop() until stopped; an error is reported and the loop goes on after 500 ms
async function withStop (seconds, loop) {
  arm(seconds)
  while (!stopping) await Promise.race([loop().catch(e => { if (!stopping) { error(e); return sleep(500) } }), stopped])
}

async function runKafkajs () {
  const { Kafka, logLevel } = require('kafkajs')
  const logCreator = () => ({ namespace, level, log }) => {
    const { message, timestamp, logger, ...extra } = log
    process.stderr.write(`[kafkajs ${namespace} ${level}] ${message} ${JSON.stringify(extra)}\n`)
  }
  const kafka = new Kafka({ clientId: `kafkajs-${mode}`, brokers: [bootstrap], logLevel: logLevel.INFO, logCreator, requestTimeout, ...security })
  const topic = need('topic')
  const admin = kafka.admin()
  await admin.connect()
  emit({ event: 'ready' })
  try {
    if (mode === 'assign') { // no manual assignment in KafkaJS: poll metadata and offsets instead
      let watermarks = {}
      await withStop(Number(need('seconds')), async () => {
        const md = await admin.fetchTopicMetadata({ topics: [topic] })
        const offs = await admin.fetchTopicOffsets(topic)
        if (polls++ === 0) {
          emit({ event: 'assigned', via: 'admin fetchTopicMetadata+fetchTopicOffsets',
            partitions: names(md.topics[0].partitions.map(p => [topic, p.partitionId])) })
          assignment = names(md.topics[0].partitions.map(p => [topic, p.partitionId]))
        }
        watermarks = Object.fromEntries(offs.map(o => [`${topic}-${o.partition}`, { low: Number(o.low), high: Number(o.high) }]))
        await sleep(500)
      })
      emit({ event: 'watermarks', offsets: watermarks })
    } else if (mode === 'subscribe') {
      if (opts.instance) console.error('client_tool: KafkaJS has no static membership, ignoring instance=')
      const commit = opts.commit === 'true'
      const consumer = kafka.consumer({ groupId: need('group'), ...groupOpts, maxWaitTimeInMs: groupOpts.maxWaitTime })
      const ev = consumer.events
      let generation = null
      consumer.on(ev.GROUP_JOIN, ({ payload }) => {
        assignment = names(Object.entries(payload.memberAssignment).flatMap(([t, ps]) => ps.map(p => [t, p])))
        emit({ event: 'assigned', partitions: assignment, generation: null, member_id: payload.memberId, leader: payload.isLeader })
      })
      consumer.on(ev.HEARTBEAT, ({ payload }) => { // GROUP_JOIN carries no generation id; heartbeats do
        if (payload.groupGenerationId !== generation) emit({ event: 'generation', generation: (generation = payload.groupGenerationId) })
      })
      consumer.on(ev.FETCH, () => { polls++ })
      consumer.on(ev.CRASH, ({ payload }) => error(payload.error))
      consumer.on(ev.COMMIT_OFFSETS, ({ payload }) => emit({ event: 'committed', offsets: Object.fromEntries(
        payload.topics.flatMap(t => t.partitions.map(p => [`${t.topic}-${p.partition}`, { offset: Number(p.offset), metadata: null }]))) }))
      arm(Number(need('seconds'))) // the run time includes the join
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await Promise.race([consumer.run({ autoCommit: commit || undefined, autoCommitInterval: commit ? 1000 : undefined,
        eachMessage: async () => {} }), stopped])
      await stopped
      await consumer.disconnect() // LeaveGroup
    } else if (mode === 'commit') { // joins the group briefly (KafkaJS has no standalone commit); no metadata
      const p = Number(need('partition')), offset = need('offset')
      await admin.setOffsets({ groupId: need('group'), topic, partitions: [{ partition: p, offset }] })
      emit({ event: 'committed', offsets: { [`${topic}-${p}`]: { offset: Number(offset), metadata: null } } })
    } else if (mode === 'fetch') {
      const res = await admin.fetchOffsets({ groupId: need('group'), topics: [topic] })
      emit({ event: 'offsets', offsets: Object.fromEntries(res[0].partitions.map(p => [`${topic}-${p.partition}`,
        Number(p.offset) < 0 ? null : { offset: Number(p.offset), metadata: p.metadata ?? '' }])) })
    } else { console.error(`unknown mode ${mode}`); process.exit(2) }
  } finally {
    await admin.disconnect()
  }
}

async function runPlatformatic () {
  const { Consumer } = await import(pathToFileURL(require.resolve('@platformatic/kafka')).href)
  const topic = need('topic')
  const consumer = new Consumer({ clientId: `platformatic-${mode}`, bootstrapBrokers: [bootstrap],
    groupId: opts.group ?? 'client-tool-unused', ...(opts.instance && { groupInstanceId: opts.instance }),
    ...(groupProtocol && { groupProtocol }),
    ...(requestTimeout && { timeout: requestTimeout, requestTimeout }), ...groupOpts }) // undefined values would override defaults
  consumer.on('error', error)
  consumer.on('consumer:heartbeat:error', p => error(p.error))
  emit({ event: 'ready' })
  const partitionsOf = async () => {
    const md = await consumer.metadata({ topics: [topic] })
    return { md, t: md.topics.get(topic) }
  }
  try {
    if (mode === 'assign') { // no group: Metadata, ListOffsets, then raw Fetch requests per leader
      const { t } = await partitionsOf()
      const parts = t.partitions.map((_, i) => i)
      const start = (await consumer.listOffsets({ topics: [topic], timestamp: -2n })).get(topic)
      assignment = names(parts.map(p => [topic, p]))
      emit({ event: 'assigned', via: 'metadata+listOffsets+fetch', partitions: assignment,
        offsets: Object.fromEntries(parts.map(p => [`${topic}-${p}`, start[p]])) })
      let hw = {}
      await withStop(Number(need('seconds')), async () => {
        const byLeader = new Map()
        for (const p of parts) byLeader.set(t.partitions[p].leader, [...(byLeader.get(t.partitions[p].leader) ?? []), p])
        await Promise.all([...byLeader].map(async ([node, ps]) => {
          const res = await consumer.fetch({ node, maxWaitTime: groupOpts.maxWaitTime ?? 500, topics: [{ topicId: t.id,
            partitions: ps.map(p => ({ partition: p, fetchOffset: start[p], currentLeaderEpoch: -1, lastFetchedEpoch: -1, partitionMaxBytes: 1048576 })) }] })
          for (const r of res.responses) for (const p of r.partitions) {
            if (p.errorCode) error({ name: 'FetchError', message: `${topic}-${p.partitionIndex} error code ${p.errorCode}` })
            hw[`${topic}-${p.partitionIndex}`] = Number(p.highWatermark)
          }
        }))
        polls++
      })
      emit({ event: 'watermarks', offsets: Object.fromEntries(Object.entries(hw).map(([k, v]) => [k, { high: v }])) })
    } else if (mode === 'subscribe') {
      consumer.on('consumer:group:leave', p => emit({ event: 'left', generation: p.generationId ?? null }))
      consumer.on('consumer:group:rebalance', () => emit({ event: 'rebalance' }))
      const committing = new Set() // partitions assigned and not yet committed (commit_offset=N)
      const onAssigned = (now, extra) => {
        for (const tp of now) if (!assignment.includes(tp)) committing.add(tp)
        for (const tp of committing) if (!now.includes(tp)) committing.delete(tp)
        assignment = now
        emit({ event: 'assigned', partitions: assignment, ...extra })
      }
      const assigned = list => names((list ?? []).flatMap(a => a.partitions.map(x => [a.topic, x])))
      if (groupProtocol !== 'consumer') {
        consumer.on('consumer:group:join', p => onAssigned(assigned(p.assignments),
          { generation: p.generationId, member_id: p.memberId, leader: p.isLeader }))
      } else { // no event carries the assignment: watch it (set from heartbeats)
        let seen = null
        setInterval(() => {
          const now = assigned(consumer.assignments)
          if (seen === null ? now.length : now.join() !== seen) onAssigned(now, { generation: null, member_id: consumer.memberId })
          seen = now.join()
        }, 100).unref()
      }
      if (opts.commit_offset !== undefined) {
        const offset = BigInt(opts.commit_offset)
        const commitLoop = async () => {
          while (!stopping) {
            const tps = [...committing]
            if (tps.length) {
              const offsets = tps.map(tp => ({ topic: tp.slice(0, tp.lastIndexOf('-')),
                partition: Number(tp.slice(tp.lastIndexOf('-') + 1)), offset, leaderEpoch: -1 }))
              try {
                await consumer.commit({ offsets })
                tps.forEach(tp => committing.delete(tp))
                emit({ event: 'committed', offsets: Object.fromEntries(tps.map(tp => [tp, { offset }])) })
              } catch (e) { // e.g. STALE_MEMBER_EPOCH mid-rebalance: retried, as the Python tool does
                emit({ event: 'commit_retry', message: describe(e) })
              }
            }
            await sleep(200)
          }
        }
        commitLoop()
      }
      arm(Number(need('seconds'))) // the run time includes the join
      const stream = await Promise.race([consumer.consume({ topics: [topic], mode: opts.mode ?? 'committed',
        fallbackMode: 'earliest', ...(opts.commit === 'true' && { autocommit: 1000 }), ...groupOpts }), stopped])
      if (stream) {
        stream.on('error', error)
        stream.on('fetch', () => { polls++ })
        stream.on('data', () => {})
        await stopped
        await stream.close()
      }
    } else if (mode === 'commit') { // standalone commit: generation -1, empty member id (no join)
      const p = Number(need('partition')), offset = BigInt(need('offset'))
      consumer.generationId = -1
      consumer.memberId = ''
      await consumer.commit({ offsets: [{ topic, partition: p, offset, leaderEpoch: -1 }] })
      emit({ event: 'committed', offsets: { [`${topic}-${p}`]: { offset, metadata: null } } })
    } else if (mode === 'fetch') {
      const { t } = await partitionsOf()
      const res = await consumer.listCommittedOffsets({ topics: [{ topic, partitions: t.partitions.map((_, i) => i) }] })
      emit({ event: 'offsets', offsets: Object.fromEntries(res.get(topic).map((o, i) => [`${topic}-${i}`,
        o < 0n ? null : { offset: o, metadata: null }])) })
    } else { console.error(`unknown mode ${mode}`); process.exit(2) }
  } finally {
    await consumer.close(true) // LeaveGroup when joined
  }
}

try {
  await (lib === 'kafkajs' ? runKafkajs() : runPlatformatic())
} catch (e) {
  error(e)
}
emit({ event: 'summary', polls, errors, assignment })
process.exit(errors ? 1 : 0)
