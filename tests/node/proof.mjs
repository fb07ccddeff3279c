// Solves a proof-of-work challenge with ALTCHA's own library (its v1 protocol, the one threadql
// speaks) and prints the payload a client would send, base64 JSON, as ALTCHA's widget makes it.
// Usage: node proof.mjs '<challenge as JSON: {algorithm, challenge, salt, signature, maxnumber}>'
import { solveChallenge } from 'altcha-lib/v1';

const challenge = JSON.parse(process.argv[2] ?? '{}');
const { promise } = solveChallenge(
  challenge.challenge,
  challenge.salt,
  challenge.algorithm,
  challenge.maxnumber,
);
const solution = await promise;
if (!solution) {
  console.error('no number up to maxnumber solves the challenge');
  process.exit(1);
}
const payload = {
  algorithm: challenge.algorithm,
  challenge: challenge.challenge,
  number: solution.number,
  salt: challenge.salt,
  signature: challenge.signature,
};
console.log(JSON.stringify({
  payload: Buffer.from(JSON.stringify(payload)).toString('base64'),
  number: solution.number,
  took_ms: solution.took,
}));
