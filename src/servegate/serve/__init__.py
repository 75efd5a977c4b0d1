"""serve stage: launch argv/env per profile and mode, server lifecycle, model preparation."""
