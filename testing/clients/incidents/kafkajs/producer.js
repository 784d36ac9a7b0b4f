// Replays tulios/kafkajs issue 918 ("Hangs on disconnect with inflight requests") with
// kafkajs at the version its directory's lockfile pins (1.14.0: the affected release;
// 1.15.0: the fix). No hangwatch code: it only produces and reports what kafkajs answered.
//
// A producer as the report's service had it: kafkajs' defaults (acks -1, requestTimeout
// 30 s, 5 retries, enforceRequestTimeout off in 1.x), one `send` of -batch messages each
// -rate tick, the next only once the last one has settled (so a send that never settles
// stops the service's writes, as it did). kafkajs' own log lines go to stderr.
// Every line on stdout is one JSON object {"ts", "event", ...}: start, ack (n: messages
// acknowledged so far), error (kafkajs' text), waiting (every 5 s while a send is
// unsettled), fatal.
'use strict'
const { Kafka, logLevel } = require('kafkajs')

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ ...fields, ts: Date.now() / 1000, event }) + '\n')
}

function args(argv) {
  const options = { brokers: '', topic: 't', rate: 5, batch: 1 }
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^-+/, '')
    if (!(name in options) || i + 1 >= argv.length) {
      throw new Error(`unknown or incomplete option ${argv[i]}`)
    }
    options[name] = typeof options[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1]
  }
  if (!options.brokers || !(options.rate > 0) || !(options.batch >= 1)) {
    throw new Error('-brokers is required, -rate and -batch must be > 0')
  }
  return options
}

const toStderr = () => ({ namespace, level, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`${log.timestamp} ${namespace} ${level} ${message} ${JSON.stringify(extra)}\n`)
}

async function main() {
  let options
  try {
    options = args(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`kafkajs-incident: ${e.message}\n`)
    process.exit(2)
  }
  const kafka = new Kafka({
    clientId: 'kafkajs-incident',
    brokers: options.brokers.split(','),
    logLevel: logLevel.DEBUG,
    logCreator: toStderr,
  })
  const producer = kafka.producer()
  let stopping = false
  const stop = () => {
    stopping = true
    process.exit(0) // no disconnect: a producer stuck by the bug would never finish it
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  try {
    await producer.connect()
  } catch (e) {
    emit('fatal', { error: String(e && e.message) })
    process.exit(1)
  }
  emit('start', { client: 'kafkajs' })
  const interval = 1000 / options.rate
  let acked = 0
  for (let b = 0; !stopping; b++) {
    const started = Date.now()
    const messages = []
    for (let i = 0; i < options.batch; i++) messages.push({ key: 'Key', value: `b${b}-m${i}` })
    const waiting = setInterval(
      () => emit('waiting', { pending: options.batch, since_send_s: (Date.now() - started) / 1000 }),
      5000
    )
    try {
      await producer.send({ topic: options.topic, messages })
      acked += messages.length
      emit('ack', { n: acked })
    } catch (e) {
      emit('error', { error: String(e && e.message) })
    } finally {
      clearInterval(waiting)
    }
    const rest = interval - (Date.now() - started)
    if (rest > 0) await new Promise(resolve => setTimeout(resolve, rest))
  }
}

main()
