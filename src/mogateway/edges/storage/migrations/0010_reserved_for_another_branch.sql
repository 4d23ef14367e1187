-- PLACEHOLDER, to be dropped when branch h-sec is merged: version 10 belongs to another branch's
-- migration, and the loader wants versions 1..n without gaps; this file only lets 0011 load here.
SELECT 1;
