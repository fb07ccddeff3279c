// The console's only way to its server: GraphQL over HTTP (POST /graphql) and one
// `graphql-transport-ws` WebSocket for live changes, both to the origin the page came from.

const ENDPOINT = new URL('/graphql', window.location.origin);
const GRAPHQL_WS = 'graphql-transport-ws';
// Waits between attempts to reopen the live connection, in milliseconds.
const RECONNECT_MS = [1000, 2000, 5000, 10000, 30000];

// An error the console shows, with the server's `extensions.code` when it gave one.
export class ApiError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'ApiError';
    this.code = code ?? null;
  }
}

// "message (CODE)" for any thrown value.
export function describe(err) {
  const message = err instanceof Error ? err.message : String(err);
  const code = err instanceof ApiError ? err.code : null;
  return code ? `${message} (${code})` : message;
}

// GraphQL over HTTP with the moderator's token. Every error becomes an ApiError; one with
// `UNAUTHENTICATED` also calls `onUnauthenticated` (the token expired or is refused).
export class Api {
  constructor(token, onUnauthenticated) {
    this.token = token;
    this.onUnauthenticated = onUnauthenticated;
  }

  async run(query, variables = {}) {
    let response;
    try {
      response = await fetch(ENDPOINT, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          authorization: `Bearer ${this.token}`,
        },
        body: JSON.stringify({ query, variables }),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch {
      throw new ApiError('Cannot reach the server.', 'NETWORK');
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    const first = body?.errors?.[0];
    if (first) {
      const error = new ApiError(first.message ?? 'The server refused the request.', first.extensions?.code);
      if (error.code === 'UNAUTHENTICATED') {
        this.onUnauthenticated(error);
      }
      throw error;
    }
    if (!response.ok || !body || typeof body.data !== 'object' || body.data === null) {
      throw new ApiError(`The server answered HTTP ${response.status}.`, 'HTTP');
    }
    return body.data;
  }
}

// One `graphql-transport-ws` connection holding any number of subscriptions, opened again after
// a drop (with growing waits) with every subscription sent again. `handlers`: `state('live' |
// 'closed')`, `resumed()` (after a drop: changes may have been missed), `unauthenticated()`
// (the server refused the token), `error(err)`.
export class Live {
  constructor(token, handlers) {
    this.url = new URL(ENDPOINT);
    this.url.protocol = this.url.protocol === 'https:' ? 'wss:' : 'ws:';
    this.token = token;
    this.handlers = handlers;
    this.subscriptions = new Map();
    this.socket = null;
    this.acknowledged = false;
    this.everLive = false;
    this.attempt = 0;
    this.timer = null;
    this.stopped = false;
  }

  start() {
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    const socket = this.socket;
    this.socket = null;
    socket?.close(1000, 'Normal Closure');
  }

  // Subscribes `query` with `variables` under `id` (replacing what `id` held); `onData(data)`
  // hears each result, `onError(err)` each error.
  subscribe(id, query, variables, onData, onError) {
    this.unsubscribe(id);
    this.subscriptions.set(id, { query, variables, onData, onError });
    this.send(id);
  }

  unsubscribe(id) {
    if (this.subscriptions.delete(id) && this.acknowledged) {
      this.socket?.send(JSON.stringify({ id, type: 'complete' }));
    }
  }

  send(id) {
    const subscription = this.subscriptions.get(id);
    if (subscription && this.acknowledged && this.socket?.readyState === WebSocket.OPEN) {
      const payload = { query: subscription.query, variables: subscription.variables };
      this.socket.send(JSON.stringify({ id, type: 'subscribe', payload }));
    }
  }

  open() {
    if (this.stopped) {
      return;
    }
    const socket = new WebSocket(this.url, GRAPHQL_WS);
    this.socket = socket;
    this.acknowledged = false;
    socket.addEventListener('open', () => {
      const payload = { Authorization: `Bearer ${this.token}` };
      socket.send(JSON.stringify({ type: 'connection_init', payload }));
    });
    socket.addEventListener('message', (event) => this.receive(socket, event));
    socket.addEventListener('close', (event) => this.closed(socket, event));
  }

  receive(socket, event) {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    const subscription = this.subscriptions.get(message.id);
    switch (message.type) {
      case 'connection_ack':
        this.acknowledged = true;
        this.attempt = 0;
        for (const id of this.subscriptions.keys()) {
          this.send(id);
        }
        this.handlers.state('live');
        if (this.everLive) {
          this.handlers.resumed();
        }
        this.everLive = true;
        break;
      case 'ping':
        socket.send(JSON.stringify({ type: 'pong', payload: message.payload }));
        break;
      case 'next': {
        const errors = message.payload?.errors;
        if (errors?.length) {
          subscription?.onError(new ApiError(errors[0].message, errors[0].extensions?.code));
        } else if (message.payload?.data) {
          subscription?.onData(message.payload.data);
        }
        break;
      }
      case 'error': {
        const first = Array.isArray(message.payload) ? message.payload[0] : message.payload;
        subscription?.onError(new ApiError(first?.message ?? 'The server ended the subscription.', first?.extensions?.code));
        break;
      }
      default:
        break;
    }
  }

  closed(socket, event) {
    if (this.socket === socket) {
      this.socket = null;
    }
    this.acknowledged = false;
    if (this.stopped) {
      return;
    }
    this.handlers.state('closed');
    if (event.code === 4403) {
      this.stopped = true;
      this.handlers.unauthenticated();
      return;
    }
    const wait = RECONNECT_MS[Math.min(this.attempt, RECONNECT_MS.length - 1)];
    this.attempt += 1;
    this.timer = setTimeout(() => this.open(), wait);
  }
}
