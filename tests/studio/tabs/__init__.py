"""The tabs' callbacks (studio/tabs/), called directly from Python."""
