// threadql proof of work, for pages of another origin: a browser runs a worker only from the
// page's own origin, so the embed on another site's page opens this frame (/embed/proof, hidden),
// which runs threadql's worker (/embed/proof-worker.js) and passes messages between the two. The
// embed hands over one end of a MessageChannel; nothing else is listened to, and the frame shows
// nothing, stores nothing and makes no request but for the worker.

let worker = null;

window.addEventListener('message', (event) => {
  const port = event.ports?.[0];
  if (event.source !== window.parent || event.data?.type !== 'threadql-proof' || !port) {
    return;
  }
  worker?.terminate();
  try {
    worker = new Worker('/embed/proof-worker.js');
  } catch (err) {
    port.postMessage({ type: 'error', error: `the proof worker cannot start: ${err?.message ?? err}` });
    return;
  }
  worker.addEventListener('message', (answer) => port.postMessage(answer.data));
  worker.addEventListener('error', () => port.postMessage({ type: 'error', error: 'the proof worker failed' }));
  port.addEventListener('message', (task) => worker.postMessage(task.data));
  port.start();
  port.postMessage({ type: 'ready' });
});
