// Loaded before kinesalite (node --require): kinesalite throws from a request's 'error' event, so
// one client that aborts a request mid-body ("aborted", ECONNRESET) would end the whole server
// and every test after it. Such an error concerns that one request only: log it and go on.
// Anything else still ends the process, as it would have.
process.on('uncaughtException', function (err) {
  if (err && (err.message === 'aborted' || err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
    console.error('kinesalite: a client abandoned a request (' + (err.code || err.message) + ')')
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
