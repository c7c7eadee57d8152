"""Accounts: password hashing, API tokens, browser sessions, CSRF and the login rate limit."""
