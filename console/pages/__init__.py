"""The customer's page: the same actions as the self-service API, as plain HTML forms that work without
JavaScript (each a POST with Django's CSRF token, answered by a redirect back to its section with a message, or
by the page again with the form's errors and a 400).

``/usage/account/`` lists the subscriptions the signed-in user has a role on; ``/usage/account/<id>/`` is one
subscription: what everyone with a role reads (caps, thresholds, keys, webhooks, contacts), and the forms only
owners get. Permissions are :mod:`console.access`'s, checked again on every POST: a form hidden from a member is
refused all the same (403), and a stranger finds nothing (404). Each section's views call the one implementation
of their actions, as the API does (:mod:`console.caps`, :mod:`console.keys`, :mod:`console.webhooks`,
:mod:`console.contacts`).

A key or a secret is shown once, in the answer to the POST that made it (a 201, or a 200 for a rolled secret, as
the API answers), never through the session or a message: those are stored (the session's table, the messages'
cookie) where the answer is not, and it is marked ``Cache-Control: no-store`` so no cache keeps it either.
"""
