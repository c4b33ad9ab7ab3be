// The header's account corner: Sign in where the server takes an issuer's tokens, then who is
// signed in and Sign out; a sentence when sign-in failed. Hidden when there is no issuer.

const byId = (id) => document.getElementById(id);

export class AccountView {
  constructor(signin) {
    this.signin = signin;
    this.box = byId("account");
    this.who = byId("account-name");
    this.signInButton = byId("sign-in");
    this.signOutButton = byId("sign-out");
    this.signInButton.addEventListener("click", () => this.startSignIn());
    this.signOutButton.addEventListener("click", () => signin.signOut());
  }

  async startSignIn() {
    this.signInButton.disabled = true;
    try {
      await this.signin.signIn(); // navigates away
    } catch (err) {
      this.signin.problem = `Sign-in failed: ${err.message}`;
      this.signInButton.disabled = false;
      this.render();
    }
  }

  render() {
    const { signin } = this;
    const user = signin.user;
    this.box.hidden = !signin.available && !signin.problem;
    this.who.textContent = user ? user : signin.problem || "";
    this.who.title = user ? `Signed in as ${user}` : signin.problem || "";
    this.who.classList.toggle("account-problem", !user && Boolean(signin.problem));
    this.signInButton.hidden = Boolean(user) || !signin.available;
    this.signOutButton.hidden = !user;
    this.box.dataset.state = user ? "signed-in" : "signed-out"; // for tests to wait on
  }
}
