"""Chapter 5, framing (paper 001): gender salience x instruction presence across four task formats."""
