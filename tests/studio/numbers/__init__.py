"""The numbers behind the explaining and comparing tabs (studio/numbers/)."""
