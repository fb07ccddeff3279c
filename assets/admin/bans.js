// Bans: banning an author (a duration and a reason, asked in a dialog), lifting a ban, and the
// view listing who is banned now; and the networks banned from guest comments (a form to ban
// one, the list, unban).

import { announce, ask, el, showError, timeText } from './dom.js';

const PAGE_SIZE = 20;
const DAY_MS = 24 * 60 * 60 * 1000;

const BAN = `mutation AdminBan($user: ID!, $until: DateTime, $reason: String) {
  banUser(userId: $user, until: $until, reason: $reason) { userId until }
}`;

const UNBAN = `mutation AdminUnban($user: ID!) { unbanUser(userId: $user) }`;

const BAN_NETWORK = `mutation AdminBanNetwork($cidr: String!, $until: DateTime, $reason: String) {
  banNetwork(cidr: $cidr, until: $until, reason: $reason) { cidr until reason at }
}`;

const UNBAN_NETWORK = `mutation AdminUnbanNetwork($cidr: String!) { unbanNetwork(cidr: $cidr) }`;

const NETWORK_BANS_QUERY = `query AdminNetworkBans { networkBans { cidr until reason at } }`;

// The time `duration` (days, or "forever") from now, as RFC 3339; null for good.
function untilFor(duration) {
  const days = duration === 'forever' ? null : Number(duration);
  return days === null ? null : new Date(Date.now() + days * DAY_MS).toISOString();
}

// "for 7 days", "for good".
function spanOf(duration) {
  const days = duration === 'forever' ? null : Number(duration);
  return days === null ? 'for good' : `for ${days} ${days === 1 ? 'day' : 'days'}`;
}

const BANS_QUERY = `query AdminBans($first: Int!, $after: String) {
  bans(first: $first, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { userId until reason at by { name } }
  }
}`;

// Asks for how long and why, then bans `author` (`{ id, name }`); focus goes back to `back`.
// Resolves true when the ban was made.
export async function banAuthor(ctx, author, back) {
  document.getElementById('ban-what').textContent = `${author.name} (${author.id})`;
  const fields = await ask(document.getElementById('ban-dialog'), document.getElementById('ban-duration'), back);
  if (!fields) {
    return false;
  }
  const until = untilFor(fields.duration);
  try {
    await ctx.api.run(BAN, { user: author.id, until, reason: fields.reason.trim() || null });
    announce(`Banned ${author.name} ${spanOf(fields.duration)}`);
    return true;
  } catch (err) {
    showError(`${author.name} could not be banned`, err);
    return false;
  }
}

// Lifts the ban of `author` (`{ id, name }`); resolves true when it was lifted.
export async function unbanAuthor(ctx, author) {
  try {
    const data = await ctx.api.run(UNBAN, { user: author.id });
    announce(data.unbanUser ? `Unbanned ${author.name}` : `${author.name} was not banned`);
    return true;
  } catch (err) {
    showError(`${author.name} could not be unbanned`, err);
    return false;
  }
}

export class BansView {
  constructor(ctx) {
    this.ctx = ctx;
    this.page = null;
    this.rows = document.getElementById('bans-rows');
    this.table = document.getElementById('bans-table');
    this.empty = document.getElementById('bans-empty');
    this.more = document.getElementById('bans-more');
    this.more.addEventListener('click', () => this.load(false));
    this.networks = new NetworkBans(ctx);
  }

  async show() {
    await Promise.all([this.load(true), this.networks.load()]);
  }

  // Shows the view with the network form filled in with `cidr` (from a guest's comment).
  async showNetwork(cidr) {
    this.networks.fill(cidr);
    await this.show();
  }

  // Reads the first page (`fresh`) or the next one, appended.
  async load(fresh) {
    this.more.disabled = true;
    try {
      const data = await this.ctx.api.run(BANS_QUERY, { first: PAGE_SIZE, after: fresh ? null : this.page?.endCursor });
      if (fresh) {
        this.rows.replaceChildren();
      }
      for (const ban of data.bans.nodes) {
        this.rows.append(this.render(ban));
      }
      this.page = data.bans.pageInfo;
      this.more.hidden = !this.page.hasNextPage;
      this.table.hidden = this.rows.children.length === 0;
      this.empty.hidden = this.rows.children.length > 0;
    } catch (err) {
      showError('The bans could not be read', err);
    } finally {
      this.more.disabled = false;
    }
  }

  render(ban) {
    const unban = el('button', { type: 'button', text: 'Unban', 'aria-label': `Unban ${ban.userId}` });
    const row = el(
      'tr',
      {},
      el('td', { text: ban.userId }),
      el('td', { text: ban.until ? timeText(ban.until) : 'Forever' }),
      el('td', { text: ban.reason ?? '' }),
      el('td', { text: timeText(ban.at) }),
      el('td', { text: ban.by?.name ?? '' }),
      el('td', {}, unban),
    );
    unban.addEventListener('click', async () => {
      unban.disabled = true;
      if (await unbanAuthor(this.ctx, { id: ban.userId, name: ban.userId })) {
        const next = row.nextElementSibling ?? row.previousElementSibling;
        row.remove();
        (next?.querySelector('button') ?? document.getElementById('bans-title')).focus();
        this.table.hidden = this.rows.children.length === 0;
        this.empty.hidden = this.rows.children.length > 0;
      } else {
        unban.disabled = false;
      }
    });
    return row;
  }
}

// The networks banned from guest comments: a form to ban one (a CIDR block, how long, why), the
// list of those banned now, and unban.
class NetworkBans {
  constructor(ctx) {
    this.ctx = ctx;
    this.form = document.getElementById('network-ban-form');
    this.cidr = document.getElementById('network-cidr');
    this.rows = document.getElementById('network-bans-rows');
    this.table = document.getElementById('network-bans-table');
    this.empty = document.getElementById('network-bans-empty');
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.ban();
    });
  }

  fill(cidr) {
    this.cidr.value = cidr;
    this.cidr.focus();
  }

  async ban() {
    const fields = Object.fromEntries(new FormData(this.form));
    const cidr = fields.cidr.trim();
    if (cidr === '') {
      this.cidr.focus();
      return;
    }
    const submit = this.form.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      await this.ctx.api.run(BAN_NETWORK, { cidr, until: untilFor(fields.duration), reason: fields.reason.trim() || null });
      announce(`Banned the network ${cidr} ${spanOf(fields.duration)}`);
      this.form.reset();
      await this.load();
    } catch (err) {
      showError(`The network ${cidr} could not be banned`, err);
    } finally {
      submit.disabled = false;
    }
  }

  async load() {
    try {
      const data = await this.ctx.api.run(NETWORK_BANS_QUERY);
      this.rows.replaceChildren(...(data.networkBans ?? []).map((ban) => this.render(ban)));
      this.updated();
    } catch (err) {
      showError('The banned networks could not be read', err);
    }
  }

  updated() {
    this.table.hidden = this.rows.children.length === 0;
    this.empty.hidden = this.rows.children.length > 0;
  }

  render(ban) {
    const unban = el('button', { type: 'button', text: 'Unban', 'aria-label': `Unban the network ${ban.cidr}` });
    const row = el(
      'tr',
      {},
      el('td', {}, el('code', { text: ban.cidr })),
      el('td', { text: ban.until ? timeText(ban.until) : 'Forever' }),
      el('td', { text: ban.reason ?? '' }),
      el('td', { text: timeText(ban.at) }),
      el('td', {}, unban),
    );
    unban.addEventListener('click', async () => {
      unban.disabled = true;
      try {
        const data = await this.ctx.api.run(UNBAN_NETWORK, { cidr: ban.cidr });
        announce(data.unbanNetwork ? `Unbanned the network ${ban.cidr}` : `The network ${ban.cidr} was not banned`);
        const next = row.nextElementSibling ?? row.previousElementSibling;
        row.remove();
        (next?.querySelector('button') ?? this.cidr).focus();
        this.updated();
      } catch (err) {
        unban.disabled = false;
        showError(`The network ${ban.cidr} could not be unbanned`, err);
      }
    });
    return row;
  }
}
